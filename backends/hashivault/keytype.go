//go:build !novault

package hashivault

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cardsign/cardsign/jose"
)

// scheme is how a key version signs: its JOSE alg and the Transit sign
// parameters that make a JWS signature of that alg.
type scheme struct {
	alg      jose.Alg
	hash     string // hash_algorithm: "sha2-256", ...; "" for Ed25519 (the message itself)
	sigAlg   string // signature_algorithm for RSA: "pkcs1v15" or "pss"
	keyType  string // the Transit key type
	rawECDSA bool   // marshaling_algorithm=jws: r||s
}

// keyTypes are the Transit key types cardsign signs with, and the alg each
// signs by default.
var keyTypes = map[string]jose.Alg{
	"ecdsa-p256": jose.ES256,
	"ecdsa-p384": jose.ES384,
	"ecdsa-p521": jose.ES512,
	"rsa-2048":   jose.RS256,
	"rsa-3072":   jose.RS256,
	"rsa-4096":   jose.RS256,
	"ed25519":    jose.EdDSA,
}

// schemeFor returns how a key of keyType signs alg ("" for its default).
func schemeFor(keyType string, alg jose.Alg) (scheme, error) {
	def, ok := keyTypes[keyType]
	if !ok {
		names := make([]string, 0, len(keyTypes))
		for k := range keyTypes {
			names = append(names, k)
		}
		slices.Sort(names)
		return scheme{}, fmt.Errorf("key type %q cannot sign a JWS (supported: %s)", keyType, strings.Join(names, ", "))
	}
	if alg == "" {
		alg = def
	}
	rsa := strings.HasPrefix(keyType, "rsa-")
	if alg != def && !(rsa && alg == jose.PS256) {
		return scheme{}, fmt.Errorf("a %s key signs %s, not %s", keyType, def, alg)
	}
	s := scheme{alg: alg, keyType: keyType}
	switch alg {
	case jose.ES256, jose.RS256, jose.PS256:
		s.hash = "sha2-256"
	case jose.ES384:
		s.hash = "sha2-384"
	case jose.ES512:
		s.hash = "sha2-512"
	}
	switch {
	case alg == jose.PS256:
		s.sigAlg = "pss"
	case rsa:
		s.sigAlg = "pkcs1v15"
	}
	s.rawECDSA = strings.HasPrefix(keyType, "ecdsa-")
	return s, nil
}

// createType is the Transit key type Create makes for alg.
func createType(alg jose.Alg) (string, error) {
	switch alg {
	case jose.ES256:
		return "ecdsa-p256", nil
	case jose.ES384:
		return "ecdsa-p384", nil
	case jose.ES512:
		return "ecdsa-p521", nil
	case jose.RS256, jose.PS256:
		return "rsa-3072", nil
	case jose.EdDSA:
		return "ed25519", nil
	}
	return "", fmt.Errorf("hashivault: no Transit key type signs %s", alg)
}
