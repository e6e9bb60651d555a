package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
)

// GenerateKey makes a new private key that signs with alg: on the curve an
// ES* alg requires, Ed25519 for EdDSA, and RSA of rsaBits bits for RS256 and
// PS256. The callers choose rsaBits because they differ in what they need:
// real keys want strength, tests want speed.
func GenerateKey(alg Alg, rsaBits int) (crypto.Signer, error) {
	var (
		k   crypto.Signer
		err error
	)
	switch alg {
	case ES256, ES384, ES512:
		k, err = ecdsa.GenerateKey(alg.ecCurve(), rand.Reader)
	case EdDSA:
		_, k, err = ed25519.GenerateKey(rand.Reader)
	case RS256, PS256:
		k, err = rsa.GenerateKey(rand.Reader, rsaBits)
	default:
		return nil, fmt.Errorf("jose: generate key: %w %q", ErrUnsupportedAlg, alg)
	}
	if err != nil {
		return nil, fmt.Errorf("jose: generate %s key: %w", alg, err)
	}
	return k, nil
}
