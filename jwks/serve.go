package jwks

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
)

// etagOf returns the strong entity tag of body: the full unpadded base64url
// SHA-256 of the bytes, quoted. The full 43 characters are kept rather than a
// prefix: the tag costs nothing to send, and a tag that depends on every bit
// of the body needs no argument about collisions. Since the body's bytes
// depend only on the key set, so does the tag, on every replica and across
// restarts.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:]) + `"`
}

// resource is one representation served by Handler or RevocationHandler.
type resource struct {
	body         []byte
	etag         string
	contentType  string
	cacheControl string
}

// allowMethods lists what both handlers accept: the documents are read-only.
const allowMethods = "GET, HEAD"

// checkMethod answers 405 for anything but GET and HEAD and reports whether
// the request may go on.
func checkMethod(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", allowMethods)
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}

// unavailable answers 503 with a fixed message: the source's error may name
// store paths or key URIs, which a public endpoint must not show. Logging it
// is the source's job.
func unavailable(w http.ResponseWriter, what string) {
	w.Header().Set("Cache-Control", "no-store") // a cache must not keep the outage
	http.Error(w, what+" temporarily unavailable", http.StatusServiceUnavailable)
}

// serve writes res, or 304 Not Modified when the request's If-None-Match
// names its tag. HEAD gets the headers and Content-Length without a body.
func serve(w http.ResponseWriter, r *http.Request, res resource) {
	h := w.Header()
	// Public documents meant for browsers too (an A2A client in a web page
	// verifying a card): any origin may read them, no credentials involved.
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", "ETag")
	h.Set("ETag", res.etag)
	h.Set("Cache-Control", res.cacheControl)
	if etagListMatches(r.Header.Values("If-None-Match"), res.etag) {
		// RFC 9110 §15.4.5: a 304 repeats ETag and Cache-Control, no body.
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", res.contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(res.body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(res.body) // the client went away; nothing to do
	}
}

// etagListMatches reports whether an If-None-Match field (possibly several
// header lines, each a comma-separated list, or "*") names etag. It uses the
// weak comparison RFC 9110 §13.1.2 prescribes for If-None-Match: W/"x"
// matches "x". Our tags are strong and change with every byte, so a weak tag
// sent back (some proxies weaken tags when they compress) still names exactly
// this body.
func etagListMatches(fields []string, etag string) bool {
	for _, f := range fields {
		for _, tag := range splitETags(f) {
			if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
				return true
			}
		}
	}
	return false
}

// splitETags splits a list of entity tags. Commas are allowed inside the
// quotes of an entity tag (RFC 9110 §8.8.3 etagc), so a plain split on ","
// would be wrong.
func splitETags(s string) []string {
	var out []string
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			return out
		}
		start := s
		s = strings.TrimPrefix(s, "W/")
		if !strings.HasPrefix(s, `"`) {
			// "*" or a malformed tag: take it up to the next comma.
			i := strings.IndexByte(s, ',')
			if i < 0 {
				i = len(s)
			}
			out = append(out, strings.TrimSpace(start[:len(start)-len(s)+i]))
			s = s[i:]
			continue
		}
		end := strings.IndexByte(s[1:], '"')
		if end < 0 {
			return out // unterminated: ignore the rest
		}
		n := len(start) - len(s) + 1 + end + 1
		out = append(out, start[:n])
		s = start[n:]
	}
}
