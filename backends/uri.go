package backends

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/cardsign/cardsign/jose"
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

// Unpinned says why uri names whatever version its provider calls current
// rather than one key for good, or "" when it names one key: an Azure Key
// Vault key without a version, a Vault Transit key without one. A URI that
// is recorded and reopened for years (an imported key, a log key) must
// not: a rotation at the provider would change the key behind it.
func Unpinned(uri string) string {
	path, _, _ := strings.Cut(uri, "?")
	lower := strings.ToLower(path)
	switch {
	case strings.HasPrefix(lower, "azurekv://") && strings.Count(path, "/") < 5:
		return "name a key version (azurekv://VAULT/keys/NAME/VERSION), not the key: its current version moves when the key is rotated in the vault"
	case strings.HasPrefix(lower, "hashivault://") && !strings.Contains(path[len("hashivault://"):], "/"):
		return "name a key version (hashivault://KEY/VERSION), not the key: its latest version moves when the key is rotated in Vault"
	}
	return ""
}

// CutScheme returns uri after "scheme://" (the scheme matched without
// regard to case, RFC 3986 §3.1), and whether it was there.
func CutScheme(uri, scheme string) (string, bool) {
	prefix := scheme + "://"
	if len(uri) < len(prefix) || !strings.EqualFold(uri[:len(prefix)], prefix) {
		return uri, false
	}
	return uri[len(prefix):], true
}

// AlgQuery reads the query of a KMS key URI, where alg is the one
// parameter defined (?alg=PS256 makes an RSA key sign RSA-PSS): its alg, ""
// when the query is empty. Anything else is a *URIError.
func AlgQuery(uri, query string) (jose.Alg, error) {
	if query == "" {
		return "", nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", NewURIError(uri, "malformed query")
	}
	var alg jose.Alg
	for name, vs := range q {
		if name != "alg" {
			return "", NewURIError(uri, fmt.Sprintf("unknown query parameter %q (only alg is defined)", name))
		}
		if len(vs) != 1 {
			return "", NewURIError(uri, "alg given more than once")
		}
		if alg, err = jose.ParseAlg(vs[0]); err != nil {
			return "", NewURIError(uri, err.Error())
		}
	}
	return alg, nil
}
