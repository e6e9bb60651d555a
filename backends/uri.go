package backends

import (
	"fmt"
	"strings"
)

// URIError reports a malformed key URI. URI is already redacted (see
// Redact), so the error can be logged as is.
type URIError struct {
	URI    string
	Reason string
}

func (e *URIError) Error() string {
	return fmt.Sprintf("backends: bad key URI %q: %s", e.URI, e.Reason)
}

// NewURIError returns a *URIError for uri with the query redacted; backends
// use it for their own URI syntax errors.
func NewURIError(uri, reason string) *URIError {
	return &URIError{URI: Redact(uri), Reason: reason}
}

// Scheme returns the lower-cased scheme of a key URI: the text before the
// first ':', which must be a valid RFC 3986 scheme.
func Scheme(uri string) (string, error) {
	i := strings.IndexByte(uri, ':')
	if i < 0 {
		return "", NewURIError(uri, `no scheme (want SCHEME:..., e.g. "file:/path/key.pem")`)
	}
	s := uri[:i]
	if !validScheme(s) {
		return "", NewURIError(uri, fmt.Sprintf("invalid scheme %q", s))
	}
	return strings.ToLower(s), nil
}

// validScheme reports whether s is ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// Redact returns uri fit for logs and error messages. The query is replaced
// by "…" because key URIs carry secrets there (RFC 7512 pkcs11 "pin-value"),
// and so is any userinfo of a hierarchical URI.
func Redact(uri string) string {
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		uri = uri[:i] + "?…"
	}
	// scheme://user:secret@host/...
	if i := strings.Index(uri, "://"); i >= 0 {
		rest := uri[i+3:]
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
			uri = uri[:i+3] + "…@" + rest[at+1:]
		}
	}
	return uri
}
