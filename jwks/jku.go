package jwks

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// A jku is a hint written by whoever made the card, so it is attacker
// input. Web servers resolve dot segments, decode %2e, merge "//", and some
// read "..;" or "\" as path separators before they route a request; a
// verifier that compares the raw text with an allow-list and then sends the
// raw text lets "https://keys.example/good/../evil/jwks.json" pass a check
// for "https://keys.example/good/" and be served from /evil/. So a jku is
// brought into one normal form (RFC 3986 §6.2.2: case, percent-encoding and
// §5.2.4 remove_dot_segments; §6.2.3: default port), compared in that form,
// and fetched in that form; what has no unambiguous normal form is refused.

// NormalizeJKU returns the normal form of a jku URL, or an error saying why
// it has none. The normal form has a lower-case http or https scheme and
// host, no default port, no userinfo or fragment, unreserved characters
// decoded and other escapes in upper-case hex, and no dot segments.
//
// Refused: other schemes, relative URLs, userinfo, fragments, characters
// RFC 3986 does not allow in a URI (spaces, non-ASCII, "\"), encoded "/",
// "\" and "%" (servers that decode twice or split on them would see other
// segments), encoded control characters, empty path segments ("//", which
// servers merge before resolving ".."), ";" in the path (Tomcat and others
// read "..;" as ".."), and invalid percent-encoding.
func NormalizeJKU(raw string) (*url.URL, error) {
	u, err := normalizeURL(raw)
	if err != nil {
		return nil, fmt.Errorf("jku %s: %w", quoteURL(raw), err)
	}
	return u, nil
}

// JKUAllowList is a parsed set of --allow-jku prefixes.
type JKUAllowList struct {
	prefixes []*url.URL
}

// ParseJKUAllowList normalizes every entry as NormalizeJKU does. An entry
// may not carry a query: a prefix is a place (scheme, host, path), and
// "under a query" has no meaning.
func ParseJKUAllowList(entries []string) (JKUAllowList, error) {
	var a JKUAllowList
	for _, e := range entries {
		u, err := normalizeURL(e)
		if err != nil {
			return JKUAllowList{}, fmt.Errorf("allow-jku entry %s: %w; give an http(s) URL prefix such as https://keys.example.com/jwks/", quoteURL(e), err)
		}
		if u.RawQuery != "" || u.ForceQuery {
			return JKUAllowList{}, fmt.Errorf("allow-jku entry %s: has a query; give a URL prefix (scheme, host and path) only", quoteURL(e))
		}
		a.prefixes = append(a.prefixes, u)
	}
	return a, nil
}

// Empty reports whether the list allows nothing.
func (a JKUAllowList) Empty() bool { return len(a.prefixes) == 0 }

// Allows reports whether u, a URL returned by NormalizeJKU, is under one of
// the prefixes: same scheme and host (and port), and a path that is the
// prefix's path or continues it at a segment boundary. A prefix ending in
// "/" admits what lies below it; one without admits itself and what lies
// below it, so https://h/good admits https://h/good and https://h/good/x,
// never https://h/good-evil.
func (a JKUAllowList) Allows(u *url.URL) bool {
	if u == nil {
		return false
	}
	path := u.EscapedPath()
	for _, p := range a.prefixes {
		if p.Scheme != u.Scheme || p.Host != u.Host {
			continue
		}
		pp := p.EscapedPath()
		if strings.HasSuffix(pp, "/") {
			if strings.HasPrefix(path, pp) {
				return true
			}
			continue
		}
		if path == pp || strings.HasPrefix(path, pp+"/") {
			return true
		}
	}
	return false
}

func normalizeURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("empty URL")
	}
	if strings.ContainsRune(raw, '\\') {
		return nil, errors.New(`contains "\"; some servers read it as "/", so it has no single meaning`)
	}
	for i := 0; i < len(raw); i++ {
		if !uriByte(raw[i]) {
			return nil, fmt.Errorf("contains %s, which RFC 3986 §2 does not allow in a URI", strconv.QuoteToASCII(raw[i:i+1]))
		}
	}
	if strings.ContainsRune(raw, '#') {
		return nil, errors.New("has a fragment (#); a key set URL names a document, not a part of one")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("not a valid URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" {
		return nil, errors.New("must be an absolute http:// or https:// URL")
	}
	if u.User != nil {
		return nil, errors.New("has userinfo (user@); credentials do not belong in a key set URL")
	}
	host, err := normalizeHost(u)
	if err != nil {
		return nil, err
	}
	path, err := normalizePath(u.EscapedPath())
	if err != nil {
		return nil, err
	}
	unescaped, err := url.PathUnescape(path)
	if err != nil {
		return nil, fmt.Errorf("path: %w", err)
	}
	out := &url.URL{Scheme: u.Scheme, Host: host, Path: unescaped, RawPath: path, RawQuery: u.RawQuery}
	if out.EscapedPath() != path {
		// url.URL would send another spelling than the one checked.
		return nil, fmt.Errorf("path %s has no stable encoding", strconv.QuoteToASCII(path))
	}
	return out, nil
}

// uriByte reports whether b may appear in a URI: unreserved, reserved
// (gen-delims and sub-delims) and "%" (RFC 3986 §2).
func uriByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!$&'()*+,;=%", b) >= 0
}

// normalizeHost lower-cases the host and drops the scheme's default port.
// It accepts DNS names and IP literals only: percent-encoded or non-ASCII
// names and IPv6 zones are refused rather than guessed at.
func normalizeHost(u *url.URL) (string, error) {
	name := strings.ToLower(u.Hostname())
	if name == "" {
		return "", errors.New("has no host")
	}
	if strings.HasPrefix(u.Host, "[") {
		if strings.ContainsRune(name, '%') {
			return "", errors.New("host has an IPv6 zone; zones are local to one machine")
		}
		name = "[" + name + "]"
	} else {
		for i := 0; i < len(name); i++ {
			c := name[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
				return "", fmt.Errorf("host %s is not a plain DNS name or IP address (use the xn-- form of an international name)", strconv.QuoteToASCII(u.Hostname()))
			}
		}
	}
	port := u.Port()
	if port == "" {
		return name, nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %s is not in 1..65535", strconv.QuoteToASCII(port))
	}
	if (u.Scheme == "http" && n == 80) || (u.Scheme == "https" && n == 443) {
		return name, nil
	}
	return name + ":" + strconv.Itoa(n), nil
}

// normalizePath decodes percent-encoded unreserved characters, upper-cases
// the hex of the other escapes (RFC 3986 §6.2.2.1–2), refuses what servers
// disagree about, and then removes dot segments (§5.2.4). Decoding comes
// first so that "%2e%2e" is removed like "..".
func normalizePath(escaped string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(escaped); i++ {
		c := escaped[i]
		switch c {
		case ';':
			return "", errors.New(`path contains ";"; servers such as Tomcat read "..;" as "..", so it has no single meaning`)
		case '%':
			if i+2 >= len(escaped) || !isHex(escaped[i+1]) || !isHex(escaped[i+2]) {
				return "", errors.New("path has invalid percent-encoding")
			}
			v := unhex(escaped[i+1])<<4 | unhex(escaped[i+2])
			i += 2
			switch {
			case v == '/':
				return "", errors.New(`path contains %2F (an encoded "/"); servers disagree on whether it separates segments`)
			case v == '\\':
				return "", errors.New(`path contains %5C (an encoded "\"); some servers read it as "/"`)
			case v == '%':
				return "", errors.New(`path contains %25 (an encoded "%"); a server that decodes twice would see other characters`)
			case v == 0xC0 || v == 0xC1:
				return "", fmt.Errorf("path contains %%%02X, which starts an overlong UTF-8 sequence (old servers decode %%C0%%AE as \".\")", v)
			case v == ';':
				return "", errors.New(`path contains %3B (an encoded ";"); servers such as Tomcat read "..;" as "..", so it has no single meaning`)
			case v < 0x20 || v == 0x7f:
				return "", fmt.Errorf("path contains %%%02X, an encoded control character", v)
			case unreserved(v):
				b.WriteByte(v)
			default:
				fmt.Fprintf(&b, "%%%02X", v)
			}
		default:
			b.WriteByte(c)
		}
	}
	p := b.String()
	if strings.Contains(p, "//") {
		return "", errors.New(`path has an empty segment ("//"); servers merge them before resolving "..", so it has no single meaning`)
	}
	for _, seg := range strings.Split(p, "/") {
		// "...", ". .", ".%20": some servers (Windows and IIS among them)
		// trim trailing dots and spaces from a segment, reading it as "..".
		if seg != "" && seg != "." && seg != ".." && strings.Trim(strings.ReplaceAll(seg, "%20", ""), ".") == "" {
			return "", fmt.Errorf("path segment %q holds only dots and spaces; some servers read it as \"..\"", seg)
		}
	}
	p = removeDotSegments(p)
	if p == "" {
		p = "/"
	}
	return p, nil
}

// removeDotSegments is RFC 3986 §5.2.4 on an absolute path.
func removeDotSegments(in string) string {
	var out []string // output segments, each with its leading "/"
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "/..":
			in = "/"
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			// Move the first segment, with its leading "/" if any, to the output.
			start := 0
			if in[0] == '/' {
				start = 1
			}
			end := strings.IndexByte(in[start:], '/')
			if end < 0 {
				end = len(in)
			} else {
				end += start
			}
			out = append(out, in[:end])
			in = in[end:]
		}
	}
	return strings.Join(out, "")
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// quoteURL names a URL from a card in an error: redacted like every URL
// this package reports, and quoted, because it is attacker text that will
// reach a terminal.
func quoteURL(raw string) string {
	return strconv.QuoteToASCII(RedactURL(raw))
}

// RedactURL drops credentials and the query from a URL before it goes into
// an error message; a JWKS URL may carry an access token. What does not
// parse as a URL with a scheme (a file path) is returned as it is.
func RedactURL(src string) string {
	u, err := url.Parse(src)
	if err != nil || u.Scheme == "" {
		return src
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	u.Fragment = ""
	return u.String()
}
