package jose

import (
	"crypto"
	"crypto/elliptic"
	"errors"
	"fmt"
	"strings"

	// The hash implementations must be linked in for crypto.Hash.New.
	_ "crypto/sha256"
	_ "crypto/sha512"
)

// Alg is a JWS "alg" value (RFC 7518 §3.1, RFC 8037 §3.1).
type Alg string

// The algorithms cardsign signs and verifies with. Others (HS*, none, ES256K,
// RS384, ...) are refused on purpose: every supported alg must be verifiable by
// the A2A SDKs, and a short list leaves less room for alg confusion.
const (
	ES256 Alg = "ES256"
	ES384 Alg = "ES384"
	ES512 Alg = "ES512"
	RS256 Alg = "RS256"
	PS256 Alg = "PS256"
	EdDSA Alg = "EdDSA"
)

// MinRSABits is the smallest RSA modulus accepted anywhere in this package.
const MinRSABits = 2048

// ErrUnsupportedAlg is wrapped by every error about an alg this package does
// not implement.
var ErrUnsupportedAlg = errors.New("unsupported alg")

// algs lists the supported algs in the order they are presented to people.
var algs = [...]Alg{ES256, ES384, ES512, RS256, PS256, EdDSA}

// Algs returns the supported algorithms, in a stable order.
func Algs() []Alg {
	out := make([]Alg, len(algs))
	copy(out, algs[:])
	return out
}

// ParseAlg returns the Alg named s. Names are case-sensitive, as in RFC 7515:
// "es256" is not ES256, and guessing would hide a misconfiguration.
func ParseAlg(s string) (Alg, error) {
	for _, a := range algs {
		if string(a) == s {
			return a, nil
		}
	}
	names := make([]string, len(algs))
	for i, a := range algs {
		names[i] = string(a)
	}
	return "", fmt.Errorf("jose: %w %q (supported: %s)", ErrUnsupportedAlg, s, strings.Join(names, ", "))
}

// Hash returns the digest that alg signs over. It is 0 for EdDSA, which signs
// the whole message, and for unsupported algs.
func (a Alg) Hash() crypto.Hash {
	switch a {
	case ES256, RS256, PS256:
		return crypto.SHA256
	case ES384:
		return crypto.SHA384
	case ES512:
		return crypto.SHA512
	}
	return 0
}

// String returns the JWS name of the alg.
func (a Alg) String() string { return string(a) }

// ecCurve returns the curve an ES* alg requires (RFC 7518 §3.4 pins each
// alg to one curve) and nil for every other alg.
func (a Alg) ecCurve() elliptic.Curve {
	switch a {
	case ES256:
		return elliptic.P256()
	case ES384:
		return elliptic.P384()
	case ES512:
		return elliptic.P521()
	}
	return nil
}
