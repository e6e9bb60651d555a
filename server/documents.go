package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
)

// JWKS renders the published key set now. It is computed from the stored
// records on each call (microseconds), never from a backend.
func (a *Authority) JWKS(ctx context.Context) (jwks.Document, error) {
	recs, err := a.records(ctx, false)
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

// Revocations returns the signed revocation document. It is re-signed, with
// the next sequence number, when the revoked set or the signing key changes,
// when half its lifetime has passed, so a cached copy never expires in a
// client's hands while the daemon runs, and when the audit head it carries
// is behind the log's and the document is revocationHeadRefresh old.
func (a *Authority) Revocations(ctx context.Context) ([]byte, error) {
	doc, err := a.revocations(ctx)
	if err != nil {
		a.log.Error("revocation document not served", "err", err)
	}
	return doc, err
}

func (a *Authority) revocations(ctx context.Context) ([]byte, error) {
	// One re-signing at a time, so sequence numbers served by this process
	// only ever grow.
	a.revMu.Lock()
	defer a.revMu.Unlock()
	recs, err := a.records(ctx, false)
	if err != nil {
		return nil, err
	}
	now := a.now()
	views := jwks.Derive(now, recs, a.policy())
	revoked := jwks.RevokedFrom(recs, now)
	key, err := a.documentSigner(ctx, views)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoRevocationSigner, err)
	}
	var state strings.Builder
	state.WriteString(key.KID)
	for _, r := range revoked {
		state.WriteString("|" + r.KID)
	}
	seq, hash, err := a.store.AuditHead(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit head for the revocation document: %w", err)
	}
	ttl := a.cfg.RevocationTTL
	storeHead := audit.Head{Seq: seq, Hash: hash}
	cur := revocationState{set: state.String(), published: storeHead, store: storeHead}
	a.mu.Lock()
	cachedDoc, cachedState, until := a.revDoc, a.revState, a.revUntil
	a.mu.Unlock()
	// The state outlives invalidateRevocations, so the head last published
	// is remembered as long as the process runs.
	prev, havePrev := parseRevocationState(cachedState)
	// The store's head is a high-water mark and never goes back; when it
	// does, the database was edited or swapped under this process. Keep
	// publishing the head already published, so auditors holding it or
	// fetching a new document still catch the loss.
	wentBack := havePrev && headBehind(storeHead, prev.published)
	if wentBack {
		cur.published = prev.published
	}
	if havePrev && cachedDoc != nil && prev.set == cur.set && now.Before(until) {
		issued := until.Add(-ttl / 2)
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
		a.log.Error("audit log head went back: the database was edited or replaced outside cardsignd; "+
			"the revocation document keeps the head already published. Restore the database from a backup and run cardsign audit verify",
			"published_seq", prev.published.Seq, "published_hash", hex.EncodeToString(prev.published.Hash),
			"store_seq", storeHead.Seq, "store_hash", hex.EncodeToString(storeHead.Hash))
	}

	docSeq, err := a.store.NextSequence(ctx, "revocations")
	if err != nil {
		return nil, err
	}
	body := jwks.Revocations{
		Sequence:  docSeq,
		IssuedAt:  now.Truncate(time.Second),
		ExpiresAt: now.Add(ttl).Truncate(time.Second),
		Revoked:   revoked,
	}
	if !a.cfg.OmitAuditHead {
		body.AuditHead = &jwks.AuditHead{Seq: cur.published.Seq, Hash: cur.published.Hash}
	}
	doc, err := jwks.SignRevocations(ctx, body, key.Signer, key.Alg, key.KID)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.revDoc, a.revState, a.revUntil = doc, cur.String(), now.Add(ttl/2)
	a.mu.Unlock()
	return doc, nil
}

// invalidateRevocations makes the next Revocations call re-sign.
func (a *Authority) invalidateRevocations() {
	a.mu.Lock()
	a.revDoc = nil
	a.mu.Unlock()
}

// revocationState is what the cached revocation document was made from,
// kept as Authority.revState (a string).
type revocationState struct {
	set       string     // the signer's kid and the revoked kids
	published audit.Head // the audit head the document carries
	store     audit.Head // the store's audit head when it was signed (lower than published if the store's went back)
}

// String puts set last, so whatever its kids hold, it parses back.
func (s revocationState) String() string {
	return s.published.String() + "\n" + s.store.String() + "\n" + s.set
}

// parseRevocationState reads String's output; false for anything else (no
// document signed yet).
func parseRevocationState(text string) (revocationState, bool) {
	parts := strings.SplitN(text, "\n", 3)
	if len(parts) != 3 {
		return revocationState{}, false
	}
	published, err1 := audit.ParseHead(parts[0])
	store, err2 := audit.ParseHead(parts[1])
	if err1 != nil || err2 != nil {
		return revocationState{}, false
	}
	return revocationState{set: parts[2], published: published, store: store}, true
}

func headEqual(a, b audit.Head) bool { return a.Seq == b.Seq && bytes.Equal(a.Hash, b.Hash) }

// headBehind reports whether h is not an extension of published as far as
// heads tell: a lower seq, or the same seq with another hash.
func headBehind(h, published audit.Head) bool {
	return h.Seq < published.Seq || (h.Seq == published.Seq && !bytes.Equal(h.Hash, published.Hash))
}
