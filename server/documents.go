package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/jwks/jwksserve"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/server/revocations"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
)

// JWKS renders the published key set now. It is computed from the stored
// records on each call (microseconds), never from a backend.
func (d *documents) JWKS(ctx context.Context) (jwks.Document, error) {
	recs, err := d.keys.records(ctx, false)
	if err != nil {
		d.log.Error("JWKS not served", "err", err)
		return jwks.Document{}, err
	}
	doc, err := jwks.Render(d.now(), recs, d.keys.policy, d.jwksMaxAge)
	if err != nil {
		d.log.Error("JWKS not served", "err", err)
	}
	return doc, err
}

// documents renders the published documents, the JWKS and the revocation
// document, for serving: from the store, or from the last read while the
// store is unreachable (within their validity).
type documents struct {
	keys        *keyring
	revocations *revocations.Publisher
	readiness   *readiness
	metrics     *Metrics
	log         *slog.Logger
	now         func() time.Time
	stale       staleDocuments // documents served from the last read

	jwksMaxAge, revocationTTL time.Duration
	// didDomain is the catalog's domain, whose DID document is served
	// (didDocument); empty when the catalog is off.
	didDomain string
}

// documentHandlers serve the published documents from pre-rendered bytes
// and headers (jwksserve.CachedHandler): a request reads an atomic pointer, the
// versions of what the document was rendered from and the clock, and
// writes; nothing is rendered, hashed or formatted per request.
type documentHandlers struct {
	jwks        *jwksserve.CachedHandler
	revocations *jwksserve.CachedHandler
	// did serves the DID document; nil when the catalog is off.
	did *jwksserve.CachedHandler
}

// newDocumentHandlers makes the JWKS, revocation document and (with a
// catalog) DID document handlers, each counting its requests by status.
func (d *documents) newDocumentHandlers() documentHandlers {
	now := func() time.Time { return d.now() } // d.now as it is at each call (tests move it)
	var did *jwksserve.CachedHandler
	if d.didDomain != "" {
		did = jwksserve.NewCachedHandler(jwksserve.CacheOptions{
			What:    "DID document",
			Render:  d.renderDID,
			Version: d.keys.version.Load,
			Now:     now,
			Observe: d.countDocumentRequest("did"),
		})
	}
	return documentHandlers{
		did: did,
		jwks: jwksserve.NewCachedHandler(jwksserve.CacheOptions{
			What:    "JWKS",
			Render:  d.renderJWKS,
			Version: d.keys.version.Load,
			Now:     now,
			Observe: d.countDocumentRequest("jwks"),
		}),
		revocations: jwksserve.NewCachedHandler(jwksserve.CacheOptions{
			What:    "revocation document",
			Render:  d.renderRevocations,
			Version: d.revocationsVersion,
			Now:     now,
			Observe: d.countDocumentRequest("revocations"),
		}),
	}
}

// keyDocument is a document made from the published keys alone (the JWKS,
// the DID document): rendered and cached the same way, and served from the
// key records last read while the store is unreachable.
type keyDocument struct {
	what, contentType string
	// body renders the document of the keys recs publish at now.
	body  func(now time.Time, recs []jwks.KeyRecord) ([]byte, error)
	stale *atomic.Pointer[staleDocument]
}

// jwksDocument is the JWKS as a keyDocument.
func (d *documents) jwksDocument() keyDocument {
	return keyDocument{what: "JWKS", contentType: jwks.MediaType, stale: &d.stale.jwks,
		body: func(now time.Time, recs []jwks.KeyRecord) ([]byte, error) {
			doc, err := jwks.Render(now, recs, d.keys.policy, d.jwksMaxAge)
			return doc.Body, err
		}}
}

// renderJWKS renders the JWKS for serving (renderKeys).
func (d *documents) renderJWKS(ctx context.Context) (jwksserve.Rendition, error) {
	return d.renderKeys(ctx, d.jwksDocument())
}

// renderKeys renders a document of the published keys for serving until
// the first of: the next scheduled key transition (the set may gain or lose
// a key then), and the moment the key records it was rendered from are due
// for their periodic re-read (so another replica's change is seen even
// without a notification). A change to the records before then (a
// revocation here, a notification from another replica, any re-read) moves
// the keyring's version, and the next request renders again.
//
// Cache-Control's max-age is what is left until the next transition from
// the end of that period, so however late in it the rendition is served,
// no cache keeps the set past the transition.
func (d *documents) renderKeys(ctx context.Context, kd keyDocument) (jwksserve.Rendition, error) {
	now := d.now()
	recs, err := d.keys.records(ctx, false)
	if err != nil {
		d.readiness.failed(err)
		if r, ok := d.staleKeys(now, err, kd); ok {
			return r, nil
		}
		d.log.Error(kd.what+" not served", "err", err)
		return jwksserve.Rendition{}, err
	}
	readAt := d.keys.readTime()
	body, err := kd.body(now, recs)
	if err != nil {
		d.log.Error(kd.what+" not served", "err", err)
		return jwksserve.Rendition{}, err
	}
	d.stale.current(d.log, kd.what, kd.stale)
	until := now.Add(max(d.keys.refresh-time.Since(readAt), 0))
	maxAge := max(d.jwksMaxAge, 0)
	if next, ok := jwks.NextTransition(now, recs, d.keys.policy); ok {
		if next.Before(until) {
			until = next
		}
		maxAge = min(maxAge, next.Sub(until))
	}
	return jwksserve.Rendition{
		Static: jwksserve.NewStatic(body, "", kd.contentType, jwksserve.CacheControl(maxAge)),
		Until:  until,
	}, nil
}

// renderRevocations prepares the revocation document for serving until the
// next periodic re-read of what it is made from, or until a change: a key
// record (the keyring's version), or the document forgotten or re-signed
// here (the publisher's changes, which follow another replica's re-signing
// by its notification). The publisher's own re-signing rules are untouched:
// each render asks it, and the duty round keeps asking.
func (d *documents) renderRevocations(ctx context.Context) (jwksserve.Rendition, error) {
	now := d.now()
	body, err := d.revocations.Document(ctx)
	if err != nil {
		d.readiness.failed(err)
		if r, ok := d.staleRevocations(now, err); ok {
			return r, nil
		}
		d.log.Error("revocation document not served", "err", err)
		return jwksserve.Rendition{}, err
	}
	d.stale.current(d.log, "revocation document", &d.stale.revocations)
	return jwksserve.Rendition{Static: jwksserve.NewRevocationStatic(body), Until: now.Add(d.keys.refresh)}, nil
}

// documentStaleRetry is how often a document served from the last read
// while the store is unreachable is tried against the store again; the
// requests in between are answered from memory.
const documentStaleRetry = time.Second

// staleDocuments says which published documents are served from the last
// read because the store is unreachable, for /readyz and its log lines.
type staleDocuments struct {
	jwks, revocations, did atomic.Pointer[staleDocument]
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
func (d *documents) staleJWKSFor() time.Duration {
	if d.revocationTTL > 0 {
		return d.revocationTTL
	}
	return time.Hour
}

// staleKeys renders a document of the published keys from the key records
// last read when the store cannot be read (err): the set as those records
// make it now, so scheduled transitions still happen. Caches may keep it
// until the first of the next scheduled transition, the end of the bound
// (staleJWKSFor past the read) and jwks_max_age; the store is tried again
// every documentStaleRetry.
func (d *documents) staleKeys(now time.Time, err error, kd keyDocument) (jwksserve.Rendition, bool) {
	recs, readAt, ok := d.keys.lastRead()
	left := d.staleJWKSFor() - time.Since(readAt)
	if !ok || !documentsFallBack(err) || left <= 0 {
		return jwksserve.Rendition{}, false
	}
	body, rerr := kd.body(now, recs)
	if rerr != nil {
		return jwksserve.Rendition{}, false
	}
	end := now.Add(left)
	until := now.Add(min(documentStaleRetry, left))
	maxAge := min(max(d.jwksMaxAge, 0), end.Sub(until))
	if next, ok := jwks.NextTransition(now, recs, d.keys.policy); ok {
		if next.Before(until) {
			until = next
		}
		maxAge = min(maxAge, next.Sub(until))
	}
	d.stale.served(d.log, kd.what, kd.stale, readAt, end, err)
	return jwksserve.Rendition{
		Static: jwksserve.NewStatic(body, "", kd.contentType, jwksserve.CacheControl(maxAge)),
		Until:  until,
	}, true
}

// staleRevocations serves the last revocation document read or signed when
// the store cannot be read (err), until its exp. Its Cache-Control stays
// no-cache: caches revalidate every use, so none keeps it past then.
func (d *documents) staleRevocations(now time.Time, err error) (jwksserve.Rendition, bool) {
	body, readAt, expires, ok := d.revocations.LastGood()
	if !ok || !documentsFallBack(err) || !now.Before(expires) {
		return jwksserve.Rendition{}, false
	}
	d.stale.served(d.log, "revocation document", &d.stale.revocations, readAt, expires, err)
	return jwksserve.Rendition{
		Static: jwksserve.NewRevocationStatic(body),
		Until:  minTime(now.Add(documentStaleRetry), expires),
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
func (d *documents) revocationsVersion() uint64 {
	return d.keys.version.Load() + d.revocations.Changes()
}

// countDocumentRequest counts a published document's requests by status,
// so a dashboard shows how many verifiers revalidate (304) versus download.
// The usual statuses' counters are looked up once.
func (d *documents) countDocumentRequest(doc string) func(code int) {
	ok := d.metrics.jwksRequests.WithLabelValues(doc, "200")
	notModified := d.metrics.jwksRequests.WithLabelValues(doc, "304")
	return func(code int) {
		switch code {
		case http.StatusOK:
			ok.Inc()
		case http.StatusNotModified:
			notModified.Inc()
		default:
			d.metrics.jwksRequests.WithLabelValues(doc, strconv.Itoa(code)).Inc()
		}
	}
}

// Revocations returns the signed revocation document (see
// revocations.Publisher.Document).
func (d *documents) Revocations(ctx context.Context) ([]byte, error) {
	doc, err := d.revocations.Document(ctx)
	if err != nil {
		d.log.Error("revocation document not served", "err", err)
	}
	return doc, err
}

// newPublisher makes the revocation document's publisher over a's store,
// keyring and duties lease.
func newPublisher(a *Authority, omitAuditHead bool) *revocations.Publisher {
	return revocations.New(revocations.Config{
		Store: a.store,
		Keys:  publisherKeys{a.keys},
		RevokedCards: func(ctx context.Context) ([]jwks.CardRevocation, error) {
			cards, err := a.store.RevokedCards(ctx)
			return registry.CardRevocations(cards), err
		},
		Lease:       a.duties.held,
		Unavailable: func(what string, err error) error { return &UnavailableError{What: what, Err: err} },
		Now:         func() time.Time { return a.now() }, // a.now as it is at each call (tests move it)
		Log:         a.log,
		TTL:         a.cfg.RevocationTTL,
		Refresh:     a.cfg.KeyRefresh,

		OmitAuditHead: omitAuditHead,
	})
}

// publisherKeys is the keyring as the revocation publisher reads it.
type publisherKeys struct{ k *keyring }

func (p publisherKeys) Records(ctx context.Context) ([]jwks.KeyRecord, error) {
	return p.k.records(ctx, false)
}

func (p publisherKeys) Policy() jwks.Policy { return p.k.policy }

func (p publisherKeys) DocumentSigner(views []jwks.View) (jwks.View, error) {
	return documentSignerView(views)
}

// Open opens rec's key; a key this replica cannot open is a
// KeyUnavailableError (the duties lease goes to a replica that can).
func (p publisherKeys) Open(ctx context.Context, rec jwks.KeyRecord) (signer.Key, error) {
	opened, err := p.k.open(ctx, rec)
	if err != nil {
		return signer.Key{}, &KeyUnavailableError{KID: rec.KID, Err: err}
	}
	return opened.key, nil
}
