package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/jwks/jwksserve"
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

// documentHandlers serve the published documents from pre-rendered bytes
// and headers (jwksserve.CachedHandler): a request reads an atomic pointer, the
// versions of what the document was rendered from and the clock, and
// writes; nothing is rendered, hashed or formatted per request.
type documentHandlers struct {
	jwks        *jwksserve.CachedHandler
	revocations *jwksserve.CachedHandler
}

// newDocumentHandlers makes the JWKS and revocation document handlers, each
// counting its requests by status.
func (a *Authority) newDocumentHandlers() documentHandlers {
	now := func() time.Time { return a.now() } // a.now as it is at each call (tests move it)
	return documentHandlers{
		jwks: jwksserve.NewCachedHandler(jwksserve.CacheOptions{
			What:    "JWKS",
			Render:  a.renderJWKS,
			Version: a.keys.version.Load,
			Now:     now,
			Observe: a.countDocumentRequest("jwks"),
		}),
		revocations: jwksserve.NewCachedHandler(jwksserve.CacheOptions{
			What:    "revocation document",
			Render:  a.renderRevocations,
			Version: a.revocationsVersion,
			Now:     now,
			Observe: a.countDocumentRequest("revocations"),
		}),
	}
}

// renderJWKS renders the JWKS for serving until the first of: the next
// scheduled key transition (the set may gain or lose a key then), and the
// moment the key records it was rendered from are due for their periodic
// re-read (so another replica's change is seen even without a
// notification). A change to the records before then (a revocation here,
// a notification from another replica, any re-read) moves the keyring's
// version, and the next request renders again.
//
// Cache-Control's max-age is what is left until the next transition from
// the end of that period, so however late in it the rendition is served,
// no cache keeps the set past the transition.
func (a *Authority) renderJWKS(ctx context.Context) (jwksserve.Rendition, error) {
	now := a.now()
	recs, err := a.keys.records(ctx, false)
	if err != nil {
		a.readiness.failed(err)
		if r, ok := a.staleJWKS(now, err); ok {
			return r, nil
		}
		a.log.Error("JWKS not served", "err", err)
		return jwksserve.Rendition{}, err
	}
	readAt := a.keys.readTime()
	doc, err := jwks.Render(now, recs, a.policy(), a.cfg.JWKSMaxAge)
	if err != nil {
		a.log.Error("JWKS not served", "err", err)
		return jwksserve.Rendition{}, err
	}
	a.stale.current(a.log, "JWKS", &a.stale.jwks)
	until := now.Add(max(a.keys.refresh-time.Since(readAt), 0))
	maxAge := max(a.cfg.JWKSMaxAge, 0)
	if next, ok := jwks.NextTransition(now, recs, a.policy()); ok {
		if next.Before(until) {
			until = next
		}
		maxAge = min(maxAge, next.Sub(until))
	}
	return jwksserve.Rendition{
		Static: jwksserve.NewStatic(doc.Body, doc.ETag, jwks.MediaType, jwksserve.CacheControl(maxAge)),
		Until:  until,
	}, nil
}

// renderRevocations prepares the revocation document for serving until the
// next periodic re-read of what it is made from, or until a change: a key
// record (the keyring's version), or the document forgotten or re-signed
// here (the publisher's changes, which follow another replica's re-signing
// by its notification). The publisher's own re-signing rules are untouched:
// each render asks it, and the duty round keeps asking.
func (a *Authority) renderRevocations(ctx context.Context) (jwksserve.Rendition, error) {
	now := a.now()
	body, err := a.revocations.document(ctx)
	if err != nil {
		a.readiness.failed(err)
		if r, ok := a.staleRevocations(now, err); ok {
			return r, nil
		}
		a.log.Error("revocation document not served", "err", err)
		return jwksserve.Rendition{}, err
	}
	a.stale.current(a.log, "revocation document", &a.stale.revocations)
	return jwksserve.Rendition{Static: jwksserve.NewRevocationStatic(body), Until: now.Add(a.keys.refresh)}, nil
}

// documentStaleRetry is how often a document served from the last read
// while the store is unreachable is tried against the store again; the
// requests in between are answered from memory.
const documentStaleRetry = time.Second

// staleDocuments says which published documents are served from the last
// read because the store is unreachable, for /readyz and its log lines.
type staleDocuments struct {
	jwks, revocations atomic.Pointer[staleDocument]
}

// staleDocument is a document served from the last read.
type staleDocument struct {
	Since time.Time `json:"since"` // first served so
	Read  time.Time `json:"read"`  // when what it was made from was read
	Until time.Time `json:"until"` // served so at most until then (then 503)
}

// served records that what is served from the last read now lasts until
// until, logging when it starts.
func (s *staleDocuments) served(log *slog.Logger, what string, p *atomic.Pointer[staleDocument], read, until time.Time, err error) {
	old := p.Load()
	d := &staleDocument{Since: time.Now(), Read: read, Until: until}
	if old != nil {
		d.Since = old.Since
	}
	p.Store(d)
	if old == nil {
		log.Warn("store unavailable: serving the "+what+" from the last read (signed, within its validity)",
			"read", read, "until", until, "err", err)
	}
}

// current records that a document is rendered from the store again.
func (s *staleDocuments) current(log *slog.Logger, what string, p *atomic.Pointer[staleDocument]) {
	if old := p.Swap(nil); old != nil {
		log.Info("store available: the "+what+" is current again", "stale_for", time.Since(old.Since).Round(time.Millisecond))
	}
}

// documentsFallBack reports whether a document that failed to render with
// err may be served from the last read: the store is unreachable (or did
// not answer in time), not a refusal or a broken record.
func documentsFallBack(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// staleJWKSFor bounds how long after the last read of the key records the
// JWKS is served from it: a key revoked meanwhile is unpublished at the
// next read, so as long as a revocation document lives (revocations.ttl,
// whose stored copy is served as long), and no longer.
func (a *Authority) staleJWKSFor() time.Duration {
	if a.cfg.RevocationTTL > 0 {
		return a.cfg.RevocationTTL
	}
	return time.Hour
}

// staleJWKS renders the JWKS from the key records last read when the store
// cannot be read (err): the set as those records make it now, so scheduled
// transitions still happen. Caches may keep it until the first of the next
// scheduled transition, the end of the bound (staleJWKSFor past the read)
// and jwks_max_age; the store is tried again every documentStaleRetry.
func (a *Authority) staleJWKS(now time.Time, err error) (jwksserve.Rendition, bool) {
	recs, readAt, ok := a.keys.lastRead()
	left := a.staleJWKSFor() - time.Since(readAt)
	if !ok || !documentsFallBack(err) || left <= 0 {
		return jwksserve.Rendition{}, false
	}
	doc, rerr := jwks.Render(now, recs, a.policy(), a.cfg.JWKSMaxAge)
	if rerr != nil {
		return jwksserve.Rendition{}, false
	}
	end := now.Add(left)
	until := now.Add(min(documentStaleRetry, left))
	maxAge := min(max(a.cfg.JWKSMaxAge, 0), end.Sub(until))
	if next, ok := jwks.NextTransition(now, recs, a.policy()); ok {
		if next.Before(until) {
			until = next
		}
		maxAge = min(maxAge, next.Sub(until))
	}
	a.stale.served(a.log, "JWKS", &a.stale.jwks, readAt, end, err)
	return jwksserve.Rendition{
		Static: jwksserve.NewStatic(doc.Body, doc.ETag, jwks.MediaType, jwksserve.CacheControl(maxAge)),
		Until:  until,
	}, true
}

// staleRevocations serves the last revocation document read or signed when
// the store cannot be read (err), until its exp. Its Cache-Control stays
// no-cache: caches revalidate every use, so none keeps it past then.
func (a *Authority) staleRevocations(now time.Time, err error) (jwksserve.Rendition, bool) {
	last := a.revocations.lastGood()
	if last == nil || !documentsFallBack(err) || !now.Before(last.state.ExpiresAt) {
		return jwksserve.Rendition{}, false
	}
	a.stale.served(a.log, "revocation document", &a.stale.revocations, last.readAt, last.state.ExpiresAt, err)
	return jwksserve.Rendition{
		Static: jwksserve.NewRevocationStatic(last.doc.Body),
		Until:  minTime(now.Add(documentStaleRetry), last.state.ExpiresAt),
	}, true
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// revocationsVersion moves whenever the key records or the revocation
// document may have changed.
func (a *Authority) revocationsVersion() uint64 {
	return a.keys.version.Load() + a.revocations.changes.Load()
}

// countDocumentRequest counts a published document's requests by status,
// so a dashboard shows how many verifiers revalidate (304) versus download.
// The usual statuses' counters are looked up once.
func (a *Authority) countDocumentRequest(doc string) func(code int) {
	ok := a.metrics.jwksRequests.WithLabelValues(doc, "200")
	notModified := a.metrics.jwksRequests.WithLabelValues(doc, "304")
	return func(code int) {
		switch code {
		case http.StatusOK:
			ok.Inc()
		case http.StatusNotModified:
			notModified.Inc()
		default:
			a.metrics.jwksRequests.WithLabelValues(doc, strconv.Itoa(code)).Inc()
		}
	}
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

// revocationsDoc is the revocation document's name in the store.
const revocationsDoc = "revocations"

// revocationPublisher keeps the signed revocation document in the store,
// where every replica reads it: the replica holding the duties lease signs
// it (once per change, with the next sequence number of the cluster), the
// others serve the stored bytes, so every replica serves the same document.
type revocationPublisher struct {
	store   store.Store
	keys    *keyring
	duties  *duties
	now     func() time.Time
	log     *slog.Logger
	ttl     time.Duration
	refresh time.Duration // how long a read of the stored document is reused
	// omitAuditHead leaves the audit head out, for verifiers built before
	// the document had one.
	omitAuditHead bool

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
	// one signed here: the pre-rendered copy served over HTTP is then out
	// of date (documentHandlers).
	changes atomic.Uint64
}

// storedRevocations is the stored document with what it was made from.
type storedRevocations struct {
	doc    store.Document
	state  revocationState
	readAt time.Time // read from or written to the store then
}

// lastGood is the last document read from or written to the store (nil:
// none yet).
func (p *revocationPublisher) lastGood() *storedRevocations {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.good
}

func newRevocationPublisher(st store.Store, keys *keyring, d *duties, now func() time.Time, log *slog.Logger, ttl, refresh time.Duration, omitAuditHead bool) *revocationPublisher {
	return &revocationPublisher{store: st, keys: keys, duties: d, now: now, log: log, ttl: ttl, refresh: refresh, omitAuditHead: omitAuditHead}
}

// document returns the signed revocation document. It is re-signed, with
// the next sequence number, when the revoked set or the signing key changes,
// when half its lifetime has passed, so a cached copy never expires in a
// client's hands, and when the audit head it carries is behind the log's and
// the document is revocationHeadRefresh old. Only the holder of the duties
// lease re-signs; another replica serves the stored document while it is
// valid, the holder bringing it up to date within a lease renewal (at once
// for a key change it is told of).
func (p *revocationPublisher) document(ctx context.Context) ([]byte, error) {
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
	lease, leader, err := p.duties.held(ctx)
	if err != nil || !leader {
		// Another replica signs it (or the lease is in doubt): serve what
		// is stored while it is valid.
		if prev != nil && now.Before(prev.state.ExpiresAt) {
			return prev.doc.Body, nil
		}
		if err == nil {
			err = fmt.Errorf("the replica holding the duties lease (%s) has not signed it yet", lease.Holder)
		}
		return nil, &UnavailableError{What: "revocation document", Err: err}
	}
	if d.wentBack {
		p.log.Error("audit log head went back: the database was edited or replaced outside cardsignd; "+
			"the revocation document keeps the head already published. Restore the database from a backup and run cardsign audit verify",
			"published_seq", cur.Published.Seq, "published_hash", hex.EncodeToString(cur.Published.Hash),
			"store_seq", cur.Store.Seq, "store_hash", hex.EncodeToString(cur.Store.Hash))
	}
	key, err := p.keys.open(ctx, d.signer.KeyRecord)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoRevocationSigner, &KeyUnavailableError{KID: d.signer.KID, Err: err})
	}
	docSeq, err := p.store.NextSequence(ctx, revocationsDoc)
	if err != nil {
		return nil, &UnavailableError{What: "revocation document sequence", Err: err}
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
	cur.ExpiresAt = now.Add(p.ttl).Truncate(time.Second)
	cur.RefreshAt = now.Add(p.ttl / 2)
	body := jwks.Revocations{Sequence: docSeq, IssuedAt: cur.IssuedAt, ExpiresAt: cur.ExpiresAt, Revoked: d.revoked, Cards: d.cards}
	if !p.omitAuditHead {
		body.AuditHead = &jwks.AuditHead{Seq: cur.Published.Seq, Hash: cur.Published.Hash}
	}
	signed, err := jwks.SignRevocations(ctx, body, key.key.Signer, key.key.Alg, key.key.KID)
	if err != nil {
		return nil, err
	}
	meta, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	doc := store.Document{Name: revocationsDoc, Seq: docSeq, Body: signed, Meta: meta}
	if err := p.store.PutDocument(ctx, lease, doc); err != nil {
		if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrStaleDocument) {
			// Another replica took over and signed: serve its document.
			p.forget()
			if prev, rerr := p.stored(ctx); rerr == nil && prev != nil && now.Before(prev.state.ExpiresAt) {
				return prev.doc.Body, nil
			}
		}
		return nil, &UnavailableError{What: "revocation document", Err: err}
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
func (p *revocationPublisher) assess(ctx context.Context) (revocationDecision, error) {
	prev, err := p.stored(ctx)
	if err != nil {
		return revocationDecision{}, err
	}
	if prev != nil {
		p.remember(prev.doc.Seq, prev.state.Published)
	}
	recs, err := p.keys.records(ctx, false)
	if err != nil {
		return revocationDecision{}, err
	}
	d := revocationDecision{prev: prev, now: p.now()}
	views := jwks.Derive(d.now, recs, p.keys.policy)
	d.revoked = jwks.RevokedFrom(recs, d.now)
	if d.signer, err = documentSignerView(views); err != nil {
		return revocationDecision{}, fmt.Errorf("%w: %v", errNoRevocationSigner, err)
	}
	var set strings.Builder
	set.WriteString(d.signer.KID)
	for _, r := range d.revoked {
		set.WriteString("|" + r.KID)
	}
	cards, err := p.store.RevokedCards(ctx)
	if err != nil {
		return revocationDecision{}, &UnavailableError{What: "revoked cards", Err: err}
	}
	d.cards = cardRevocations(cards)
	for _, c := range cards {
		set.WriteString("|card:" + hex.EncodeToString(c.CanonicalSHA256))
	}
	seq, hash, err := p.store.AuditHead(ctx)
	if err != nil {
		return revocationDecision{}, &UnavailableError{What: "audit log", Err: fmt.Errorf("audit head for the revocation document: %w", err)}
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
		case !d.wentBack && d.now.Before(prev.state.IssuedAt.Add(revocationHeadRefresh)):
			d.due = false
		}
	}
	return d, nil
}

// remember raises the process's high-water marks of the document sequence
// and the audit head published, which outlive the database they came from.
func (p *revocationPublisher) remember(seq int64, head audit.Head) {
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
func (p *revocationPublisher) stored(ctx context.Context) (*storedRevocations, error) {
	p.mu.Lock()
	cached, readAt := p.cached, p.readAt
	p.mu.Unlock()
	if cached != nil && time.Since(readAt) < p.refresh {
		return cached, nil
	}
	start := time.Now()
	doc, err := p.store.Document(ctx, revocationsDoc)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, &UnavailableError{What: "revocation document", Err: err}
	}
	s := &storedRevocations{doc: doc, readAt: start}
	if err := json.Unmarshal(doc.Meta, &s.state); err != nil {
		// Written by this code only; unreadable means edited by hand.
		// Treat it as due for re-signing.
		p.log.Warn("stored revocation document has unreadable metadata; re-signing it", "seq", doc.Seq, "err", err)
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

// forget makes the next document call read the stored document again
// (and re-sign it when due).
func (p *revocationPublisher) forget() {
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
