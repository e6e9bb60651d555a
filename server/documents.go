package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// JWKS renders the published key set now. It is computed from the stored
// records on each call (microseconds), never from a backend.
func (a *Authority) JWKS(ctx context.Context) (jwks.Document, error) {
	recs, err := a.keys.records(ctx, false)
	if err != nil {
		a.log.Error("JWKS not served", "err", err)
		return jwks.Document{}, err
	}
	doc, err := jwks.Render(a.now(), recs, a.policy(), a.cfg.JWKSMaxAge)
	if err != nil {
		a.log.Error("JWKS not served", "err", err)
	}
	return doc, err
}

// revocationHeadRefresh is how long a revocation document is served after
// the audit log head moved past the one it carries. The head is what lets an
// auditor catch records deleted from the end of the log (audit.Head.Check):
// records appended after the last published head are not covered, so the
// document should follow the head; but re-signing at every fetch after every
// signature would cost a signature (a KMS call, rate-limited) and a durable
// sequence write per fetch. One minute bounds both: at most one re-sign per
// minute for the head, and a published head at most a minute (plus the time
// since the last fetch) behind the log.
const revocationHeadRefresh = time.Minute

// Revocations returns the signed revocation document (see
// revocationPublisher.document).
func (a *Authority) Revocations(ctx context.Context) ([]byte, error) {
	doc, err := a.revocations.document(ctx)
	if err != nil {
		a.log.Error("revocation document not served", "err", err)
	}
	return doc, err
}

var errNoRevocationSigner = errors.New("no published key to sign the revocation document")

// revocationPublisher signs the revocation document and keeps the last one,
// with what it was made from, so that fetches do not each cost a signature.
type revocationPublisher struct {
	store store.Store
	keys  *keyring
	now   func() time.Time
	log   *slog.Logger
	ttl   time.Duration
	// omitAuditHead leaves the audit head out, for verifiers built before
	// the document had one.
	omitAuditHead bool

	// signing serializes re-signing, so sequence numbers served by this
	// process only ever grow; mu guards the cache alone, so invalidating it
	// never waits for a signature.
	signing sync.Mutex
	mu      sync.Mutex
	doc     []byte          // cached signed document; nil after invalidate
	state   revocationState // what the last document was made from
	signed  bool            // a document was signed: state holds the head last published
	until   time.Time       // re-sign after this
}

func newRevocationPublisher(st store.Store, keys *keyring, now func() time.Time, log *slog.Logger, ttl time.Duration, omitAuditHead bool) *revocationPublisher {
	return &revocationPublisher{store: st, keys: keys, now: now, log: log, ttl: ttl, omitAuditHead: omitAuditHead}
}

// document returns the signed revocation document. It is re-signed, with
// the next sequence number, when the revoked set or the signing key changes,
// when half its lifetime has passed, so a cached copy never expires in a
// client's hands while the daemon runs, and when the audit head it carries
// is behind the log's and the document is revocationHeadRefresh old.
func (p *revocationPublisher) document(ctx context.Context) ([]byte, error) {
	p.signing.Lock()
	defer p.signing.Unlock()
	recs, err := p.keys.records(ctx, false)
	if err != nil {
		return nil, err
	}
	now := p.now()
	views := jwks.Derive(now, recs, p.keys.policy)
	revoked := jwks.RevokedFrom(recs, now)
	key, err := p.keys.documentSigner(ctx, views)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoRevocationSigner, err)
	}
	var set strings.Builder
	set.WriteString(key.KID)
	for _, r := range revoked {
		set.WriteString("|" + r.KID)
	}
	seq, hash, err := p.store.AuditHead(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit head for the revocation document: %w", err)
	}
	storeHead := audit.Head{Seq: seq, Hash: hash}
	cur := revocationState{set: set.String(), published: storeHead, store: storeHead}
	p.mu.Lock()
	cachedDoc, prev, havePrev, until := p.doc, p.state, p.signed, p.until
	p.mu.Unlock()
	// The state outlives invalidate, so the head last published is
	// remembered as long as the process runs.
	//
	// The store's head is a high-water mark and never goes back; when it
	// does, the database was edited or swapped under this process. Keep
	// publishing the head already published, so auditors holding it or
	// fetching a new document still catch the loss.
	wentBack := havePrev && headBehind(storeHead, prev.published)
	if wentBack {
		cur.published = prev.published
	}
	if havePrev && cachedDoc != nil && prev.set == cur.set && now.Before(until) {
		issued := until.Add(-p.ttl / 2)
		switch {
		case headEqual(prev.store, cur.store): // the log did not move
			return cachedDoc, nil
		case !wentBack && now.Before(issued.Add(revocationHeadRefresh)):
			return cachedDoc, nil
		}
	}
	if wentBack {
		// Logged when the store's head changes, not at every fetch: the
		// state below records the store head this was seen at.
		p.log.Error("audit log head went back: the database was edited or replaced outside cardsignd; "+
			"the revocation document keeps the head already published. Restore the database from a backup and run cardsign audit verify",
			"published_seq", prev.published.Seq, "published_hash", hex.EncodeToString(prev.published.Hash),
			"store_seq", storeHead.Seq, "store_hash", hex.EncodeToString(storeHead.Hash))
	}

	docSeq, err := p.store.NextSequence(ctx, "revocations")
	if err != nil {
		return nil, fmt.Errorf("revocation document sequence: %w", err)
	}
	body := jwks.Revocations{
		Sequence:  docSeq,
		IssuedAt:  now.Truncate(time.Second),
		ExpiresAt: now.Add(p.ttl).Truncate(time.Second),
		Revoked:   revoked,
	}
	if !p.omitAuditHead {
		body.AuditHead = &jwks.AuditHead{Seq: cur.published.Seq, Hash: cur.published.Hash}
	}
	doc, err := jwks.SignRevocations(ctx, body, key.Signer, key.Alg, key.KID)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.doc, p.state, p.signed, p.until = doc, cur, true, now.Add(p.ttl/2)
	p.mu.Unlock()
	return doc, nil
}

// invalidate makes the next document call re-sign.
func (p *revocationPublisher) invalidate() {
	p.mu.Lock()
	p.doc = nil
	p.mu.Unlock()
}

// revocationState is what the cached revocation document was made from.
type revocationState struct {
	set       string     // the signer's kid and the revoked kids
	published audit.Head // the audit head the document carries
	store     audit.Head // the store's audit head when it was signed (lower than published if the store's went back)
}

func headEqual(a, b audit.Head) bool { return a.Seq == b.Seq && bytes.Equal(a.Hash, b.Hash) }

// headBehind reports whether h is not an extension of published as far as
// heads tell: a lower seq, or the same seq with another hash.
func headBehind(h, published audit.Head) bool {
	return h.Seq < published.Seq || (h.Seq == published.Seq && !bytes.Equal(h.Hash, published.Hash))
}
