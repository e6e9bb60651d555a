package catalog

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/jwks/jwksserve"
)

// Handler serves the stored catalog at aicatalog.WellKnownPath.
type Handler struct {
	pub    *Publisher // nil: the catalog is off
	maxAge time.Duration
	now    func() time.Time
	// last holds the header values of the catalog last served: they are
	// made again only when the catalog or its max-age (whole seconds)
	// changes, not per request.
	last atomic.Pointer[servedHeaders]
}

// servedHeaders are a catalog's response header values, each a slice of
// one set into the response's header map as it is (net/http only reads
// them; Header.Set replaces a slice, never writes into it).
type servedHeaders struct {
	etag                                 string
	bodyLen                              int
	maxAge                               int64
	hETag, hCacheControl, hContentLength []string
}

// Header values every catalog response shares.
var (
	hAnyOrigin  = []string{"*"}
	hExposeETag = []string{"ETag"}
	hNoSniff    = []string{"nosniff"}
	hMediaType  = []string{aicatalog.MediaType}
)

// headers returns the header values of doc served with maxAge seconds.
func (h *Handler) headers(doc Served, maxAge int64) *servedHeaders {
	if s := h.last.Load(); s != nil && s.etag == doc.ETag && s.bodyLen == len(doc.Body) && s.maxAge == maxAge {
		return s
	}
	s := &servedHeaders{etag: doc.ETag, bodyLen: len(doc.Body), maxAge: maxAge,
		hETag:          []string{doc.ETag},
		hCacheControl:  []string{"public, max-age=" + strconv.FormatInt(maxAge, 10)},
		hContentLength: []string{strconv.Itoa(len(doc.Body))}}
	h.last.Store(s)
	return s
}

// NewHandler serves pub's catalog (nil: the catalog is off, 404); maxAge
// bounds Cache-Control (the JWKS's: a catalog signed by a key revoked
// since must not outlive it in caches by more than the key set does); now
// is the clock expiresAt is compared with.
func NewHandler(pub *Publisher, maxAge time.Duration, now func() time.Time) *Handler {
	return &Handler{pub: pub, maxAge: maxAge, now: now}
}

// MaxAge is how long a cache may keep a catalog whose earliest expiresAt
// is expires, served at now: at most limit, never past expires, whole
// seconds rounded down.
func MaxAge(now, expires time.Time, limit time.Duration) int64 {
	left := min(expires.Sub(now), max(limit, 0))
	return int64(max(left, 0) / time.Second)
}

// ServeHTTP answers GET and HEAD: the stored bytes (every replica the
// same), a strong ETag from them (If-None-Match → 304), Cache-Control
// public with a max-age that never outlives an expiresAt in the document;
// 404 when the catalog is off, 503 with Retry-After while it is being made
// or no ES256 key can sign it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	if h.pub == nil {
		writeJSON(w, http.StatusNotFound, "this cardsignd publishes no AI Catalog (configure catalog.domain)")
		return
	}
	doc, err := h.pub.Document(r.Context())
	if err != nil {
		retry, msg := "1", "the AI Catalog is being signed; retry in a second"
		if errors.Is(err, ErrNoSigner) {
			retry, msg = "60", "no ES256 (P-256) key can sign the AI Catalog"
		} else if !errors.Is(err, ErrNotReady) {
			h.pub.cfg.Log.Warn("AI Catalog not served", "err", err)
			retry, msg = "5", "the AI Catalog is temporarily unavailable"
		}
		w.Header().Set("Retry-After", retry)
		writeJSON(w, http.StatusServiceUnavailable, msg)
		return
	}
	s := h.headers(doc, MaxAge(h.now(), doc.ExpiresAt, h.maxAge))
	hd := w.Header()
	hd["Access-Control-Allow-Origin"] = hAnyOrigin
	hd["Access-Control-Expose-Headers"] = hExposeETag
	hd["Etag"] = s.hETag
	hd["Cache-Control"] = s.hCacheControl
	if inm := r.Header["If-None-Match"]; len(inm) > 0 && jwksserve.ETagListMatches(inm, doc.ETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd["Content-Type"] = hMediaType
	hd["X-Content-Type-Options"] = hNoSniff
	hd["Content-Length"] = s.hContentLength
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(doc.Body)
	}
}

// writeJSON answers with {"error": msg}, never cached.
func writeJSON(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
