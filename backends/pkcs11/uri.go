//go:build cgo && !nopkcs11

package pkcs11

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/cardsign/cardsign/backends"
	pkcs11uri "github.com/stefanberger/go-pkcs11uri"
)

// keyURI is a parsed pkcs11: key URI. RFC 7512 semantics: every attribute
// given must match; an attribute left out matches anything.
type keyURI struct {
	raw string // as given; may carry a PIN, so only ever shown through redact

	// token holds the path attributes that select a token, by RFC 7512 name
	// ("token", "serial", "slot-id", "manufacturer", "model",
	// "slot-description", "slot-manufacturer", "library-*").
	token map[string]string

	object    string // CKA_LABEL
	hasObject bool
	id        []byte // CKA_ID
	hasID     bool

	module    string // query module-path; "" means the configured default
	pin       string // pin-value
	hasPIN    bool
	pinSource string // pin-source, read when the token is opened
}

// tokenAttrs are the RFC 7512 path attributes that select a token, in the
// order they are shown in messages.
var tokenAttrs = [...]string{
	"token", "serial", "slot-id", "manufacturer", "model",
	"slot-description", "slot-manufacturer",
	"library-manufacturer", "library-description", "library-version",
}

// keyAttrs are the path attributes that select an object.
var keyAttrs = [...]string{"object", "id", "type"}

// parseURI parses a pkcs11: URI with go-pkcs11uri and checks what this
// backend needs on top of RFC 7512: known path attributes only (an attribute
// we cannot match must not be silently ignored, or the URI would select a
// different key than its author meant), type absent or "private",
// module-path rather than module-name. It does no I/O: a pin-source file is
// read by pinFor when the token is opened.
func parseURI(raw string) (*keyURI, error) {
	if len(raw) < len(Scheme)+1 || !strings.EqualFold(raw[:len(Scheme)+1], Scheme+":") {
		return nil, uriError(raw, "not a pkcs11: URI")
	}
	norm := Scheme + ":" + raw[len(Scheme)+1:]
	pathPart, query, _ := strings.Cut(norm[len(Scheme)+1:], "?")

	// go-pkcs11uri reports a bad %-escape with the offending bytes; in a
	// pin-value those are part of the PIN, so check that attribute first and
	// say nothing about its content.
	for part := range strings.SplitSeq(query, "&") {
		if name, v, _ := strings.Cut(part, "="); name == "pin-value" {
			if _, err := url.PathUnescape(v); err != nil {
				return nil, uriError(raw, "pin-value is not validly %-encoded")
			}
		}
	}
	u := pkcs11uri.New()
	if err := u.Parse(norm); err != nil {
		return nil, uriError(raw, "malformed: "+err.Error())
	}

	k := &keyURI{raw: raw, token: map[string]string{}}
	if pathPart != "" {
		for part := range strings.SplitSeq(pathPart, ";") {
			name, _, _ := strings.Cut(part, "=")
			if !known(name) {
				return nil, uriError(raw, fmt.Sprintf("unsupported path attribute %q (supported: %s, %s)",
					name, strings.Join(tokenAttrs[:], ", "), strings.Join(keyAttrs[:], ", ")))
			}
		}
	}
	for _, name := range tokenAttrs {
		if v, ok := u.GetPathAttribute(name, false); ok {
			k.token[name] = v
		}
	}
	if v, ok := k.token["slot-id"]; ok {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, uriError(raw, "slot-id is not a decimal number")
		}
		k.token["slot-id"] = strconv.FormatUint(n, 10)
	}
	if t, ok := u.GetPathAttribute("type", false); ok && t != "private" {
		return nil, uriError(raw, fmt.Sprintf("type=%s: only private keys sign (use type=private or leave it out)", t))
	}
	k.object, k.hasObject = u.GetPathAttribute("object", false)
	if id, ok := u.GetPathAttribute("id", false); ok {
		k.id, k.hasID = []byte(id), true
	}

	if _, ok := u.GetQueryAttribute("module-name", false); ok {
		return nil, uriError(raw, "module-name is not supported; give the module's absolute path as module-path")
	}
	k.module, _ = u.GetQueryAttribute("module-path", false)
	if v, ok := u.GetQueryAttribute("pin-value", false); ok {
		k.pin, k.hasPIN = v, true
	}
	k.pinSource, _ = u.GetQueryAttribute("pin-source", false)
	return k, nil
}

// pinFor returns the PIN for k: pin-value, else the content of the
// pin-source file, which must be in one of pinDirs, else def (the
// configured PIN).
func (k *keyURI) pinFor(def string, pinDirs []string) (string, error) {
	switch {
	case k.hasPIN:
		return k.pin, nil
	case k.pinSource != "":
		pin, err := readPINSource(k.pinSource, pinDirs)
		if err != nil {
			return "", uriError(k.raw, err.Error())
		}
		return pin, nil
	}
	return def, nil
}

func known(name string) bool {
	for _, a := range tokenAttrs {
		if a == name {
			return true
		}
	}
	for _, a := range keyAttrs {
		if a == name {
			return true
		}
	}
	return false
}

// uriError is backends.NewURIError with redact's extra care.
func uriError(raw, reason string) error {
	return &backends.URIError{URI: redact(raw), Reason: reason}
}

// redact is backends.Redact (which drops the query, where RFC 7512 puts
// pin-value) plus one more guard: a PIN misplaced into the path
// ("pkcs11:token=t;pin-value=1234") hides the whole path.
func redact(uri string) string {
	r := backends.Redact(uri)
	path, query, hasQuery := strings.Cut(r, "?")
	if strings.Contains(strings.ToLower(path), "pin-") {
		path = Scheme + ":…"
	}
	if hasQuery {
		return path + "?" + query
	}
	return path
}

// wantToken describes the token attributes of k for messages, e.g.
// `token="signing" serial="1234"`; "any token" when there are none.
func (k *keyURI) wantToken() string {
	var b strings.Builder
	for _, name := range tokenAttrs {
		if v, ok := k.token[name]; ok {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s=%q", name, v)
		}
	}
	if b.Len() == 0 {
		return "any token"
	}
	return b.String()
}

// keyName describes the key attributes of k for messages:
// "object=NAME;id=%01%02".
func (k *keyURI) keyName() string { return keyName(k.object, k.hasObject, k.id, k.hasID) }

func keyName(object string, hasObject bool, id []byte, hasID bool) string {
	var parts []string
	if hasObject {
		parts = append(parts, "object="+escapePath(object))
	}
	if hasID {
		parts = append(parts, "id="+escapeAll(id))
	}
	return strings.Join(parts, ";")
}

// formatURI builds the URI that Create returns, in a fixed attribute order
// (go-pkcs11uri's Format iterates a map, so its order varies). The module
// path is only written when it is not the default, so a URI stays valid when
// the default module moves.
func formatURI(token, object string, id []byte, module string) string {
	s := Scheme + ":token=" + escapePath(token) + ";object=" + escapePath(object) + ";id=" + escapeAll(id)
	if module != "" {
		s += "?module-path=" + escapeQuery(module)
	}
	return s
}

const upperHex = "0123456789ABCDEF"

// escapeAll pct-encodes every byte: RFC 7512 §2.3 recommends it for id.
func escapeAll(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		s.WriteByte('%')
		s.WriteByte(upperHex[c>>4])
		s.WriteByte(upperHex[c&15])
	}
	return s.String()
}

// escapePath pct-encodes all but RFC 3986 unreserved characters: always a
// valid pk11-pchar, and never a ';', '?' or '%' that would end or confuse the
// attribute.
func escapePath(v string) string { return escape(v, "") }

// escapeQuery is escapePath that also leaves '/' alone, for module paths.
func escapeQuery(v string) string { return escape(v, "/") }

func escape(v, keep string) string {
	var s strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', strings.IndexByte(keep, c) >= 0:
			s.WriteByte(c)
		default:
			s.WriteByte('%')
			s.WriteByte(upperHex[c>>4])
			s.WriteByte(upperHex[c&15])
		}
	}
	return s.String()
}
