// Package jwksserve serves the documents cardsignd publishes (the JWKS and
// the signed revocation document) over HTTP: pre-rendered bytes and headers,
// entity tags and conditional requests, GET and HEAD only, open CORS. It is
// kept apart from jwks so that what only builds and checks documents does
// not depend on net/http.
package jwksserve

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cardsign/cardsign/jwks"
)

// CacheControl is the JWKS Cache-Control value for maxAge: "public,
// max-age=N" with N its whole seconds, rounded down (so never past the
// moment maxAge ends), 0 when maxAge is negative.
func CacheControl(maxAge time.Duration) string {
	return "public, max-age=" + strconv.FormatInt(int64(max(maxAge, 0)/time.Second), 10)
}

// allowMethods lists what both handlers accept: the documents are read-only.
const allowMethods = "GET, HEAD"

// Header values shared by every Static. A header map holds these slices
// themselves: net/http only reads them, Header.Set replaces a slice rather
// than writing into it, and Header.Add appends to a slice whose capacity
// is its length, so it copies.
var (
	hdrAnyOrigin    = []string{"*"}
	hdrExposeETag   = []string{"ETag"}
	hdrNoSniff      = []string{"nosniff"}
	hdrAllowMethods = []string{allowMethods}
	hdrNoStore      = []string{"no-store"}
)

// Static is one representation of a published document rendered once, with
// every response header value built, to be served any number of times
// without rendering, hashing or formatting anything per request. It is
// immutable once made, so it can be shared between goroutines and swapped
// atomically (CachedHandler).
type Static struct {
	body         []byte
	etag         string
	cacheControl string
	// Header values, each a slice of one, set into the response's header
	// map as they are (canonical keys).
	hETag, hCacheControl, hContentType, hContentLength []string
}

// NewStatic prepares body for serving: its entity tag (etag, or the body's
// SHA-256 as jwks.ETagOf when etag is empty), Content-Type, Cache-Control and
// Content-Length. body must not be modified afterwards.
func NewStatic(body []byte, etag, contentType, cacheControl string) *Static {
	if etag == "" {
		etag = jwks.ETagOf(body)
	}
	return &Static{
		body:           body,
		etag:           etag,
		cacheControl:   cacheControl,
		hETag:          []string{etag},
		hCacheControl:  []string{cacheControl},
		hContentType:   []string{contentType},
		hContentLength: []string{strconv.Itoa(len(body))},
	}
}

// Body is the document's bytes (not to be modified).
func (s *Static) Body() []byte { return s.body }

// ETag is the entity tag served with the document.
func (s *Static) ETag() string { return s.etag }

// CacheControlValue is the Cache-Control value served with the document.
func (s *Static) CacheControlValue() string { return s.cacheControl }

// ServeHTTP answers GET and HEAD with s (405 otherwise).
func (s *Static) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if checkMethod(w, r) {
		s.serve(w, r)
	}
}

// checkMethod answers 405 for anything but GET and HEAD and reports whether
// the request may go on.
func checkMethod(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header()["Allow"] = hdrAllowMethods
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}

// fromSource is the start the dynamic handlers share: a method other than
// GET or HEAD is refused before source is asked, and a source error answers
// 503 (see unavailable). ok is false when the answer has been written.
func fromSource[T any](w http.ResponseWriter, r *http.Request, source func(ctx context.Context) (T, error), what string) (v T, ok bool) {
	if !checkMethod(w, r) {
		return v, false
	}
	v, err := source(r.Context())
	if err != nil {
		unavailable(w, what)
		return v, false
	}
	return v, true
}

// unavailable answers 503 with a fixed message: the source's error may name
// store paths or key URIs, which a public endpoint must not show. Logging it
// is the source's job.
func unavailable(w http.ResponseWriter, what string) {
	h := w.Header()
	h["Cache-Control"] = hdrNoStore // a cache must not keep the outage
	http.Error(w, what+" temporarily unavailable", http.StatusServiceUnavailable)
}

// serve writes s, or 304 Not Modified when the request's If-None-Match
// names its tag, and returns the status. HEAD gets the headers and
// Content-Length without a body. Nothing here allocates: the header map
// takes prepared slices, and the If-None-Match list is scanned in place.
func (s *Static) serve(w http.ResponseWriter, r *http.Request) int {
	h := w.Header()
	// Public documents meant for browsers too (an A2A client in a web page
	// verifying a card): any origin may read them, no credentials involved.
	h["Access-Control-Allow-Origin"] = hdrAnyOrigin
	h["Access-Control-Expose-Headers"] = hdrExposeETag
	h["Etag"] = s.hETag
	h["Cache-Control"] = s.hCacheControl
	if inm := r.Header["If-None-Match"]; len(inm) > 0 && ETagListMatches(inm, s.etag) {
		// RFC 9110 §15.4.5: a 304 repeats ETag and Cache-Control, no body.
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	h["Content-Type"] = s.hContentType
	h["X-Content-Type-Options"] = hdrNoSniff
	h["Content-Length"] = s.hContentLength
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(s.body) // the client went away; nothing to do
	}
	return http.StatusOK
}

// ETagListMatches reports whether an If-None-Match field (possibly several
// header lines, each a comma-separated list, or "*") names etag. It uses the
// weak comparison RFC 9110 §13.1.2 prescribes for If-None-Match: W/"x"
// matches "x". Our tags are strong and change with every byte, so a weak tag
// sent back (some proxies weaken tags when they compress) still names exactly
// this body.
func ETagListMatches(fields []string, etag string) bool {
	for _, f := range fields {
		if f == etag {
			return true // the common case: one line, our tag
		}
		for s := f; ; {
			tag, rest, ok := nextETag(s)
			if !ok {
				break
			}
			if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
				return true
			}
			s = rest
		}
	}
	return false
}

// splitETags splits a list of entity tags (nextETag, to the end).
func splitETags(s string) []string {
	var out []string
	for {
		tag, rest, ok := nextETag(s)
		if !ok {
			return out
		}
		out = append(out, tag)
		s = rest
	}
}

// nextETag returns the first entity tag of a list and the rest of it; ok is
// false at the end of the list or at an unterminated tag (the rest is
// ignored). Commas are allowed inside the quotes of an entity tag (RFC 9110
// §8.8.3 etagc), so a plain split on "," would be wrong. "*" or a malformed
// tag is taken up to the next comma.
func nextETag(s string) (tag, rest string, ok bool) {
	s = strings.TrimLeft(s, " \t,")
	if s == "" {
		return "", "", false
	}
	start := s
	s = strings.TrimPrefix(s, "W/")
	if !strings.HasPrefix(s, `"`) {
		i := strings.IndexByte(s, ',')
		if i < 0 {
			i = len(s)
		}
		return strings.TrimSpace(start[:len(start)-len(s)+i]), s[i:], true
	}
	end := strings.IndexByte(s[1:], '"')
	if end < 0 {
		return "", "", false
	}
	n := len(start) - len(s) + 1 + end + 1
	return start[:n], start[n:], true
}
