package jwks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/cardsign/cardsign/jose"
)

// MaxSize caps a JWK Set document. Real sets hold a handful of keys (a few
// KiB); the cap keeps a hostile or broken URL from exhausting memory.
const MaxSize = 1 << 20

// Parse reads a JWK Set: a JSON object with a "keys" array of public JWKs,
// each checked by jose.ParseJWK. Other top-level members are ignored (RFC
// 7517 §5). It refuses a key with private members (RFC 7517 §5 allows them,
// but a published set that carries one has leaked a key), duplicate kids,
// duplicate object members, trailing data and documents over MaxSize.
func Parse(data []byte) (Set, error) {
	if len(data) > MaxSize {
		return Set{}, fmt.Errorf("jwks: document is %d bytes, over the %d-byte limit", len(data), MaxSize)
	}
	rawKeys, err := keysArray(data)
	if err != nil {
		return Set{}, fmt.Errorf("jwks: %w", err)
	}
	set := Set{Keys: make([]jose.JWK, 0, len(rawKeys))}
	for i, raw := range rawKeys {
		priv, err := jose.PrivateMembers(raw)
		if err != nil {
			return Set{}, fmt.Errorf("jwks: keys[%d]: %w", i, err)
		}
		if len(priv) > 0 {
			// Name the members, never their values.
			return Set{}, fmt.Errorf("jwks: keys[%d]: a JWKS must not carry private keys (private members present: %s)", i, strings.Join(priv, ", "))
		}
		k, err := jose.ParseJWK(raw)
		if err != nil {
			return Set{}, fmt.Errorf("jwks: keys[%d]: %w", i, err)
		}
		set.Keys = append(set.Keys, k)
	}
	if err := checkKids(set.Keys); err != nil {
		return Set{}, err
	}
	return set, nil
}

// keysArray returns the elements of the top-level "keys" array, refusing
// what encoding/json would silently resolve (duplicate members, invalid
// UTF-8, trailing data).
func keysArray(data []byte) ([]json.RawMessage, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("document is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("document is not a JSON object")
	}
	var keys []json.RawMessage
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("bad JSON: %w", err)
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, fmt.Errorf("duplicate member %q", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("bad JSON in member %q: %w", name, err)
		}
		if name != "keys" {
			continue
		}
		if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
			return nil, errors.New(`member "keys" is not an array`)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, fmt.Errorf("bad JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	if !seen["keys"] {
		return nil, errors.New(`missing member "keys"`)
	}
	return keys, nil
}
