package jose

import (
	"crypto"
	"crypto/sha256"
	"fmt"
)

// Thumbprint returns the RFC 7638 JWK thumbprint of pub: SHA-256 over the
// required members of its JWK in lexicographic order with no whitespace,
// base64url without padding. It is the default kid (DESIGN §4), so it depends
// on the key only, never on kid, alg or use.
func Thumbprint(pub crypto.PublicKey) (string, error) {
	k, err := publicJWK(pub)
	if err != nil {
		return "", err
	}
	return thumbprint(k)
}

// thumbprint computes the RFC 7638 thumbprint of the key-type members of k.
func thumbprint(k JWK) (string, error) {
	var required []member // RFC 7638 §3.2
	switch k.Kty {
	case "EC":
		required = []member{{"crv", k.Crv}, {"kty", k.Kty}, {"x", k.X}, {"y", k.Y}}
	case "OKP": // RFC 8037 §2
		required = []member{{"crv", k.Crv}, {"kty", k.Kty}, {"x", k.X}}
	case "RSA":
		required = []member{{"e", k.E}, {"kty", k.Kty}, {"n", k.N}}
	default:
		return "", fmt.Errorf("jose: thumbprint: unsupported kty %q", k.Kty)
	}
	b, err := writeObject(required)
	if err != nil {
		return "", fmt.Errorf("jose: thumbprint: %w", err)
	}
	sum := sha256.Sum256(b)
	return b64(sum[:]), nil
}
