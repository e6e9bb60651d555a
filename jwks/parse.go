package jwks

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
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

// keysArray returns the elements of the top-level "keys" array, each in its
// compact form for jose, after reading the whole document with strictjson's
// parser (duplicate members at any depth, invalid UTF-8, lone surrogates,
// numbers a double cannot hold and trailing data are refused, with the path).
func keysArray(data []byte) ([][]byte, error) {
	doc, err := jose.ParseObject(data)
	if err != nil {
		return nil, err
	}
	keys, ok := doc.Get("keys")
	switch {
	case !ok:
		return nil, errors.New(`missing member "keys"`)
	case keys.Kind != strictjson.Array:
		return nil, errors.New(`member "keys" is not an array`)
	}
	out := make([][]byte, len(keys.Arr))
	for i, k := range keys.Arr {
		out[i] = k.Compact()
	}
	return out, nil
}
