// Package revocations publishes the signed revocation document (the keys
// and cards revoked, and the audit log head) that every replica serves: the
// replica holding the duties lease signs it once per change and keeps it in
// the store, the others serve the stored bytes, and while the store is
// unreachable the last one read is served until it expires.
package revocations

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
)

// Config is what a publisher reads, signs with and writes to.
type Config struct {
	Store Store
	Keys  Keys
	// RevokedCards are the cards revoked in the registry.
	RevokedCards func(ctx context.Context) ([]jwks.CardRevocation, error)
	// Lease reports whether this process holds the duties lease (and
	// which lease fences the write); only its holder signs.
	Lease func(ctx context.Context) (lease store.Lease, held bool, err error)
	// Unavailable wraps a failure of a dependency (what: the store's
	// document, its sequence, the audit log) as the caller reports one.
	Unavailable func(what string, err error) error
	Now         func() time.Time
	Log         *slog.Logger
	TTL         time.Duration // a document's lifetime; re-signed at half of it
	Refresh     time.Duration // how long a read of the stored document is reused
	// OmitAuditHead leaves the audit head out, for verifiers built before
	// the document had one.
	OmitAuditHead bool
}

// Store holds the signed document and the sequence and audit head it
// carries.
type Store interface {
	store.Documents
	NextSequence(ctx context.Context, name string) (int64, error)
	AuditHead(ctx context.Context) (seq int64, hash []byte, err error)
}

// Keys are the key records and the key that signs the document.
type Keys interface {
	// Records are the key records now (a recent read).
	Records(ctx context.Context) ([]jwks.KeyRecord, error)
	Policy() jwks.Policy
	// DocumentSigner picks the key that signs among views.
	DocumentSigner(views []jwks.View) (jwks.View, error)
	// Open opens rec's key to sign with; its error names the key.
	Open(ctx context.Context, rec jwks.KeyRecord) (signer.Key, error)
}

// HeadRefresh is how long a revocation document is served after
// the audit log head moved past the one it carries. The head is what lets an
// auditor catch records deleted from the end of the log (audit.Head.Check):
// records appended after the last published head are not covered, so the
// document should follow the head; but re-signing at every fetch after every
// signature would cost a signature (a KMS call, rate-limited) and a durable
// sequence write per fetch. One minute bounds both: at most one re-sign per
// minute for the head, and a published head at most a minute (plus the time
// since the last fetch) behind the log.
const HeadRefresh = time.Minute

// ErrNoSigner: no key may sign the document now (none published, or the
// one that should cannot be opened here).
var ErrNoSigner = errors.New("no published key to sign the revocation document")

// DocumentName is the revocation document's name in the store.
const DocumentName = "revocations"

// Publisher keeps the signed revocation document in the store,
// where every replica reads it: the replica holding the duties lease signs
// it (once per change, with the next sequence number of the cluster), the
// others serve the stored bytes, so every replica serves the same document.
type Publisher struct {
	Config

	// signing serializes re-signing in this process; mu guards the cache
	// alone, so forgetting it never waits for a signature.
	signing sync.Mutex
	mu      sync.Mutex
	cached  *storedRevocations // last read from (or written to) the store; nil: read again
	readAt  time.Time
	// good is the last document read from (or written to) the store, kept
	// when cached is forgotten: served while the store is unreachable.
	good *storedRevocations
	// forgotAt: a change was announced then; a read started before it is
	// not kept.
	forgotAt time.Time
	// maxSeq and maxHead are the highest document sequence and audit head
	// this process has seen published: a database restored from a backup
	// takes its stored document and counter back with it, and must not
	// take the published ones back too.
	maxSeq  int64
	maxHead audit.Head

	// changes grows when the cached document is forgotten or replaced by
	// one signed here: a pre-rendered copy served over HTTP is then out of
	// date (Changes).
	changes atomic.Uint64
}

// storedRevocations is the stored document with what it was made from.
type storedRevocations struct {
	doc    store.Document
	state  revocationState
	readAt time.Time // read from or written to the store then
}

// LastGood is the last document read from or written to the store, when
// it was read and when it expires; ok is false before any. It is what is
// served while the store is unreachable.
func (p *Publisher) LastGood() (body []byte, readAt, expires time.Time, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.good == nil {
		return nil, time.Time{}, time.Time{}, false
	}
	return p.good.doc.Body, p.good.readAt, p.good.state.ExpiresAt, true
}

// Changes grows whenever the document to serve may have changed: forgotten
// (a change announced), or replaced by one signed here.
func (p *Publisher) Changes() uint64 { return p.changes.Load() }

// Reread reads the stored document again when its last read is older than
// the refresh period, so that a replica that does not sign it has it at
// hand should the store go away.
func (p *Publisher) Reread(ctx context.Context) error {
	_, err := p.stored(ctx)
	return err
}

// New returns a publisher; nothing is read before the first Document.
func New(c Config) *Publisher { return &Publisher{Config: c} }

// Document returns the signed revocation document. It is re-signed, with
// the next sequence number, when the revoked set or the signing key changes,
// when half its lifetime has passed, so a cached copy never expires in a
// client's hands, and when the audit head it carries is behind the log's and
// the document is HeadRefresh old. Only the holder of the duties
// lease re-signs; another replica serves the stored document while it is
// valid, the holder bringing it up to date within a lease renewal (at once
// for a key change it is told of).
func (p *Publisher) Document(ctx context.Context) ([]byte, error) {
	d, err := p.assess(ctx)
	if err != nil || !d.due {
		return d.body(), err
	}
	p.signing.Lock()
	defer p.signing.Unlock()
	// Another call may have signed while this one waited: decide again,
	// so that one change costs one signature however many fetch at once.
	if d, err = p.assess(ctx); err != nil || !d.due {
		return d.body(), err
	}
	prev, cur, now := d.prev, d.cur, d.now
	lease, leader, err := p.Lease(ctx)
	if err != nil || !leader {
		// Another replica signs it (or the lease is in doubt): serve what
		// is stored while it is valid.
		if prev != nil && now.Before(prev.state.ExpiresAt) {
			return prev.doc.Body, nil
		}
		if err == nil {
			err = fmt.Errorf("the replica holding the duties lease (%s) has not signed it yet", lease.Holder)
		}
		return nil, p.Unavailable("revocation document", err)
	}
	if d.wentBack {
		p.Log.Error("audit log head went back: the database was edited or replaced outside cardsignd; "+
			"the revocation document keeps the head already published. Restore the database from a backup and run cardsign audit verify",
			"published_seq", cur.Published.Seq, "published_hash", hex.EncodeToString(cur.Published.Hash),
			"store_seq", cur.Store.Seq, "store_hash", hex.EncodeToString(cur.Store.Hash))
	}
	key, err := p.Keys.Open(ctx, d.signer.KeyRecord)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSigner, err)
	}
	docSeq, err := p.Store.NextSequence(ctx, DocumentName)
	if err != nil {
		return nil, p.Unavailable("revocation document sequence", err)
	}
	// Never below what was stored (a document copied from another store
	// may be ahead of this store's counter) nor what this process already
	// published (a database restored from a backup takes its counter
	// back with it).
	p.mu.Lock()
	floor := p.maxSeq
	p.mu.Unlock()
	if prev != nil {
		floor = max(floor, prev.doc.Seq)
	}
	docSeq = max(docSeq, floor+1)
	cur.IssuedAt = now.Truncate(time.Second)
	cur.ExpiresAt = now.Add(p.TTL).Truncate(time.Second)
	cur.RefreshAt = now.Add(p.TTL / 2)
	body := jwks.Revocations{Sequence: docSeq, IssuedAt: cur.IssuedAt, ExpiresAt: cur.ExpiresAt, Revoked: d.revoked, Cards: d.cards}
	if !p.OmitAuditHead {
		body.AuditHead = &jwks.AuditHead{Seq: cur.Published.Seq, Hash: cur.Published.Hash}
	}
	signed, err := jwks.SignRevocations(ctx, body, key.Signer, key.Alg, key.KID)
	if err != nil {
		return nil, err
	}
	meta, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	doc := store.Document{Name: DocumentName, Seq: docSeq, Body: signed, Meta: meta}
	if err := p.Store.PutDocument(ctx, lease, doc); err != nil {
		if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrStaleDocument) {
			// Another replica took over and signed: serve its document.
			p.Forget()
			if prev, rerr := p.stored(ctx); rerr == nil && prev != nil && now.Before(prev.state.ExpiresAt) {
				return prev.doc.Body, nil
			}
		}
		return nil, p.Unavailable("revocation document", err)
	}
	p.mu.Lock()
	p.cached, p.readAt = &storedRevocations{doc: doc, state: cur, readAt: time.Now()}, time.Now()
	p.good = p.cached
	p.mu.Unlock()
	p.changes.Add(1)
	p.remember(doc.Seq, cur.Published)
	return signed, nil
}

// revocationDecision is what assess found: whether the stored document is
// due for re-signing, and what a new one would say.
type revocationDecision struct {
	due      bool
	prev     *storedRevocations // nil: none stored
	cur      revocationState    // what a document signed now says (times unset)
	wentBack bool               // the store's audit head is behind the published one
	signer   jwks.View
	revoked  []jwks.Revocation
	cards    []jwks.CardRevocation
	now      time.Time
}

// body is the stored document's bytes, when there is one to serve.
func (d revocationDecision) body() []byte {
	if d.prev == nil {
		return nil
	}
	return d.prev.doc.Body
}

// assess compares the stored document with the key records and audit head
// now.
func (p *Publisher) assess(ctx context.Context) (revocationDecision, error) {
	prev, err := p.stored(ctx)
	if err != nil {
		return revocationDecision{}, err
	}
	if prev != nil {
		p.remember(prev.doc.Seq, prev.state.Published)
	}
	recs, err := p.Keys.Records(ctx)
	if err != nil {
		return revocationDecision{}, err
	}
	d := revocationDecision{prev: prev, now: p.Now()}
	views := jwks.Derive(d.now, recs, p.Keys.Policy())
	d.revoked = jwks.RevokedFrom(recs, d.now)
	if d.signer, err = p.Keys.DocumentSigner(views); err != nil {
		return revocationDecision{}, fmt.Errorf("%w: %v", ErrNoSigner, err)
	}
	var set strings.Builder
	set.WriteString(d.signer.KID)
	for _, r := range d.revoked {
		set.WriteString("|" + r.KID)
	}
	d.cards, err = p.RevokedCards(ctx)
	if err != nil {
		return revocationDecision{}, p.Unavailable("revoked cards", err)
	}
	for _, c := range d.cards {
		set.WriteString("|card:" + hex.EncodeToString(c.CanonicalSHA256))
	}
	seq, hash, err := p.Store.AuditHead(ctx)
	if err != nil {
		return revocationDecision{}, p.Unavailable("audit log", fmt.Errorf("audit head for the revocation document: %w", err))
	}
	storeHead := audit.Head{Seq: seq, Hash: hash}
	d.cur = revocationState{Set: set.String(), Published: storeHead, Store: storeHead}
	// The store's head is a high-water mark and never goes back; when it
	// does, the database was edited, swapped or restored from a backup.
	// Keep publishing the highest head already published (by this process
	// or, as stored, by another), so auditors holding it or fetching a new
	// document still catch the loss.
	p.mu.Lock()
	published := p.maxHead
	p.mu.Unlock()
	if d.wentBack = published.Hash != nil && headBehind(storeHead, published); d.wentBack {
		d.cur.Published = published
	}
	d.due = true
	// A stored document that carries less than this process published
	// (the database restored from a backup) is due at once.
	restored := d.wentBack && headBehind(prev.stateOrZero().Published, d.cur.Published)
	if prev != nil && prev.state.Set == d.cur.Set && d.now.Before(prev.state.RefreshAt) && !restored {
		switch {
		case headEqual(prev.state.Store, d.cur.Store): // the log did not move
			d.due = false
		case !d.wentBack && d.now.Before(prev.state.IssuedAt.Add(HeadRefresh)):
			d.due = false
		}
	}
	return d, nil
}

// remember raises the process's high-water marks of the document sequence
// and the audit head published, which outlive the database they came from.
func (p *Publisher) remember(seq int64, head audit.Head) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.maxSeq = max(p.maxSeq, seq)
	if p.maxHead.Hash == nil || head.Seq > p.maxHead.Seq {
		p.maxHead = head
	}
}

func (s *storedRevocations) stateOrZero() revocationState {
	if s == nil {
		return revocationState{}
	}
	return s.state
}

// stored returns the stored document (nil when there is none), read again
// when the last read is older than the refresh period or was forgotten.
func (p *Publisher) stored(ctx context.Context) (*storedRevocations, error) {
	p.mu.Lock()
	cached, readAt := p.cached, p.readAt
	p.mu.Unlock()
	if cached != nil && time.Since(readAt) < p.Refresh {
		return cached, nil
	}
	start := time.Now()
	doc, err := p.Store.Document(ctx, DocumentName)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, p.Unavailable("revocation document", err)
	}
	s := &storedRevocations{doc: doc, readAt: start}
	if err := json.Unmarshal(doc.Meta, &s.state); err != nil {
		// Written by this code only; unreadable means edited by hand.
		// Treat it as due for re-signing.
		p.Log.Warn("stored revocation document has unreadable metadata; re-signing it", "seq", doc.Seq, "err", err)
		s.state = revocationState{}
	}
	p.mu.Lock()
	if start.After(p.readAt) && start.After(p.forgotAt) {
		p.cached, p.readAt = s, start
	}
	if p.good == nil || !p.good.readAt.After(start) {
		p.good = s
	}
	p.mu.Unlock()
	return s, nil
}

// Forget makes the next Document call read the stored document again
// (and re-sign it when due).
func (p *Publisher) Forget() {
	p.mu.Lock()
	p.cached, p.forgotAt = nil, time.Now()
	p.mu.Unlock()
	p.changes.Add(1)
}

// revocationState is what a stored revocation document was made from.
type revocationState struct {
	Set       string     `json:"set"`       // the signer's kid and the revoked kids
	Published audit.Head `json:"published"` // the audit head the document carries
	Store     audit.Head `json:"store"`     // the store's audit head when it was signed (lower than Published if the store's went back)
	IssuedAt  time.Time  `json:"issued_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	RefreshAt time.Time  `json:"refresh_at"` // re-signed from then on: half its lifetime
}

func headEqual(a, b audit.Head) bool { return a.Seq == b.Seq && bytes.Equal(a.Hash, b.Hash) }

// headBehind reports whether h is not an extension of published as far as
// heads tell: a lower seq, or the same seq with another hash.
func headBehind(h, published audit.Head) bool {
	return h.Seq < published.Seq || (h.Seq == published.Seq && !bytes.Equal(h.Hash, published.Hash))
}
