package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"errors"
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

// DefaultAlg returns the alg a key signs with when nothing else says so. RSA
// keys get RS256 rather than PS256 because it is the alg every JOSE library
// verifies; PS256 has to be asked for.
func DefaultAlg(pub crypto.PublicKey) (Alg, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k == nil || k.Curve == nil {
			return "", errors.New("jose: default alg: empty EC public key")
		}
		// ecCurve is the one table of which curve goes with which alg.
		for _, a := range [...]Alg{ES256, ES384, ES512} {
			if a.ecCurve() == k.Curve {
				return a, nil
			}
		}
		return "", fmt.Errorf("jose: default alg: %w for EC curve %s", ErrUnsupportedAlg, k.Curve.Params().Name)
	case ed25519.PublicKey:
		return EdDSA, nil
	case *rsa.PublicKey:
		return RS256, nil
	}
	return "", fmt.Errorf("jose: default alg: %w for key type %T", ErrUnsupportedAlg, pub)
}
