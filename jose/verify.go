package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"fmt"
	"math/big"
)

// Verify checks a JWS signature over signingInput with pub. It returns an
// error wrapping ErrSignatureInvalid when the signature does not match (that
// includes an ES* signature that is not exactly 2*size bytes, as RFC 7518
// §3.4 requires), and other errors when the check cannot be made because the
// key does not fit the alg.
func Verify(alg Alg, pub crypto.PublicKey, signingInput, sig []byte) error {
	if err := CheckKey(alg, pub); err != nil {
		return fmt.Errorf("jose: verify: %w", err)
	}
	switch alg {
	case EdDSA:
		if len(sig) != ed25519.SignatureSize {
			return fmt.Errorf("%w: EdDSA signature is %d bytes, want %d", ErrSignatureInvalid, len(sig), ed25519.SignatureSize)
		}
		if !ed25519.Verify(pub.(ed25519.PublicKey), signingInput, sig) {
			return ErrSignatureInvalid
		}
		return nil
	}

	h := alg.Hash().New()
	h.Write(signingInput)
	digest := h.Sum(nil)

	switch alg {
	case ES256, ES384, ES512:
		size := alg.ecSize()
		if len(sig) != 2*size {
			return fmt.Errorf("%w: %s signature is %d bytes, want %d", ErrSignatureInvalid, alg, len(sig), 2*size)
		}
		r := new(big.Int).SetBytes(sig[:size])
		s := new(big.Int).SetBytes(sig[size:])
		if !ecdsa.Verify(pub.(*ecdsa.PublicKey), digest, r, s) {
			return ErrSignatureInvalid
		}
	case RS256:
		if err := rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, digest, sig); err != nil {
			return fmt.Errorf("%w: %v", ErrSignatureInvalid, err)
		}
	case PS256:
		opts := &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA256}
		if err := rsa.VerifyPSS(pub.(*rsa.PublicKey), crypto.SHA256, digest, sig, opts); err != nil {
			return fmt.Errorf("%w: %v", ErrSignatureInvalid, err)
		}
	}
	return nil
}
