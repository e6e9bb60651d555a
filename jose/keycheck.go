package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"fmt"
)

// KeyMismatchError reports a key that cannot be used with an alg: the wrong
// key type, the wrong curve, or an RSA modulus that is too small. Its message
// names the alg and the key type, never key material.
type KeyMismatchError struct {
	Alg     Alg
	KeyType string // e.g. "EC P-256", "RSA 1024-bit", "Ed25519"
	Reason  string
}

func (e *KeyMismatchError) Error() string {
	return fmt.Sprintf("jose: alg %s does not fit key %s: %s", e.Alg, e.KeyType, e.Reason)
}

// KeyType describes a public key for people: "EC P-256", "RSA 2048-bit",
// "Ed25519", or the Go type for anything else. It never includes key bytes.
func KeyType(pub crypto.PublicKey) string {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k == nil || k.Curve == nil {
			return "EC (empty)"
		}
		return "EC " + k.Curve.Params().Name
	case ed25519.PublicKey:
		return "Ed25519"
	case *rsa.PublicKey:
		if k == nil || k.N == nil {
			return "RSA (empty)"
		}
		return fmt.Sprintf("RSA %d-bit", k.N.BitLen())
	}
	return fmt.Sprintf("%T", pub)
}

// CheckKey reports whether pub can sign or verify with alg. It is called
// before every Sign and Verify so that, for instance, a P-256 key configured
// as ES384 fails loudly instead of producing a signature nobody can verify.
func CheckKey(alg Alg, pub crypto.PublicKey) error {
	if _, err := ParseAlg(string(alg)); err != nil {
		return err
	}
	mismatch := func(reason string) error {
		return &KeyMismatchError{Alg: alg, KeyType: KeyType(pub), Reason: reason}
	}
	switch alg {
	case ES256, ES384, ES512:
		k, ok := pub.(*ecdsa.PublicKey)
		if !ok || k == nil || k.Curve == nil {
			return mismatch("need an EC key")
		}
		want := alg.ecCurve()
		if k.Curve != want {
			return mismatch("need curve " + want.Params().Name)
		}
	case RS256, PS256:
		k, ok := pub.(*rsa.PublicKey)
		if !ok || k == nil || k.N == nil {
			return mismatch("need an RSA key")
		}
		if k.N.BitLen() < MinRSABits {
			return mismatch(fmt.Sprintf("RSA modulus has %d bits, need at least %d", k.N.BitLen(), MinRSABits))
		}
		if k.E < 3 || k.E%2 == 0 {
			return mismatch("RSA public exponent must be odd and at least 3")
		}
	case EdDSA:
		k, ok := pub.(ed25519.PublicKey)
		if !ok {
			return mismatch("need an Ed25519 key")
		}
		if len(k) != ed25519.PublicKeySize {
			return mismatch(fmt.Sprintf("Ed25519 public key is %d bytes, want %d", len(k), ed25519.PublicKeySize))
		}
	}
	return nil
}
