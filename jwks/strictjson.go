package jwks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// strictObject reads one JSON object into its members, refusing what
// encoding/json would silently resolve (duplicate members, invalid UTF-8,
// trailing data): signed documents must mean one thing to every parser.
func strictObject(data []byte) (map[string]json.RawMessage, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("not valid UTF-8")
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
		name, _ := tok.(string)
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

// exactMembers checks that m has exactly the named members: a missing one is
// an error, and so is an unknown one, since a member a verifier ignores is
// one it cannot have checked.
func exactMembers(m map[string]json.RawMessage, names ...string) error {
	for _, n := range names {
		if _, ok := m[n]; !ok {
			return fmt.Errorf("missing member %q", n)
		}
	}
	if len(m) != len(names) {
		for n := range m {
			known := false
			for _, want := range names {
				known = known || n == want
			}
			if !known {
				return fmt.Errorf("unexpected member %q", n)
			}
		}
	}
	return nil
}

// stringOf decodes a member that must be a JSON string.
func stringOf(m map[string]json.RawMessage, name string) (string, error) {
	var s string
	if err := json.Unmarshal(m[name], &s); err != nil {
		return "", fmt.Errorf("member %q is not a string", name)
	}
	return s, nil
}
