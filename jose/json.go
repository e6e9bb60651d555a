package jose

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// ParseObject reads one JSON object into its members. It is stricter than
// encoding/json on purpose: a key document with two "x" members, invalid
// UTF-8 or trailing data means different things to different parsers, so it
// is refused rather than resolved the way encoding/json happens to.
func ParseObject(data []byte) (map[string]json.RawMessage, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	m := make(map[string]json.RawMessage)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("bad JSON: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, errors.New("bad JSON: object key is not a string")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("bad JSON in member %q: %w", name, err)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("duplicate member %q", name)
		}
		m[name] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, fmt.Errorf("bad JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	return m, nil
}

// stringMember returns member name of m as a string; "" when absent. A member
// that is present but not a string is an error, not silently "".
func stringMember(m map[string]json.RawMessage, name string) (string, error) {
	raw, ok := m[name]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("member %q is not a string", name)
	}
	return s, nil
}

// member is one name/value pair of an object written by writeObject.
type member struct{ name, value string }

// writeObject serializes string members as RFC 8785 (JCS) would: members
// sorted by name, no whitespace, minimal string escaping. Empty values are
// left out, which is how optional JWK members are omitted. The same key
// therefore always has the same bytes, which keeps JWKS ETags stable.
func writeObject(members []member) ([]byte, error) {
	sorted := make([]member, 0, len(members))
	for _, m := range members {
		if m.value != "" {
			sorted = append(sorted, m)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range sorted {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeString(&b, m.name); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := writeString(&b, m.value); err != nil {
			return nil, fmt.Errorf("member %q: %w", m.name, err)
		}
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// writeString writes s as a JSON string with RFC 8785 §3.2.2.2 escaping.
// encoding/json is not used because it escapes <, >, & and U+2028/9, which
// JCS does not.
func writeString(b *strings.Builder, s string) error {
	if !utf8.ValidString(s) {
		return errors.New("string is not valid UTF-8")
	}
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return nil
}

// b64 encodes as JOSE base64url: URL alphabet, no padding (RFC 7515 §2).
func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// DecodeBase64URL decodes JOSE base64url strictly: no padding, no line breaks (which
// encoding/base64 would skip), no non-zero trailing bits. Each key value then
// has exactly one encoding, so a thumbprint cannot be changed by re-encoding.
func DecodeBase64URL(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("base64url value contains a line break")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not unpadded base64url: %w", err)
	}
	return b, nil
}
