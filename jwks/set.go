package jwks

import (
	"bytes"
	"fmt"

	"github.com/cardsign/cardsign/jose"
)

// MediaType is the registered media type of a JWK Set (RFC 7517 §8.5.2).
const MediaType = "application/jwk-set+json"

// Set is a JWK Set. Keys keep their order: it is the publisher's choice
// (for instance the active key first) and part of the document's bytes.
type Set struct {
	Keys []jose.JWK
}

// MarshalJSON writes {"keys":[...]} with each key in jose.JWK form (sorted
// members, no whitespace, public members only). A set with two keys of the
// same kid is refused, since Parse would refuse the result.
func (s Set) MarshalJSON() ([]byte, error) {
	if err := checkKids(s.Keys); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`{"keys":[`)
	for i, k := range s.Keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := k.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("jwks: keys[%d]: %w", i, err)
		}
		b.Write(kb)
	}
	b.WriteString(`]}`)
	return b.Bytes(), nil
}

// Lookup returns the key with the given kid. Verifiers pick keys by kid only
// (DESIGN §4), so an empty kid never matches, not even a key without one.
func (s Set) Lookup(kid string) (jose.JWK, bool) {
	if kid == "" {
		return jose.JWK{}, false
	}
	for _, k := range s.Keys {
		if k.Kid == kid {
			return k, true
		}
	}
	return jose.JWK{}, false
}

// checkKids reports two keys sharing a non-empty kid: a verifier could not
// tell which of them a signature names.
func checkKids(keys []jose.JWK) error {
	seen := make(map[string]int, len(keys))
	for i, k := range keys {
		if k.Kid == "" {
			continue
		}
		if j, dup := seen[k.Kid]; dup {
			return fmt.Errorf("jwks: keys[%d] and keys[%d] have the same kid %q", j, i, k.Kid)
		}
		seen[k.Kid] = i
	}
	return nil
}
