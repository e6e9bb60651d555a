package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"fmt"
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
	msg, _ := signerOpts(alg, signingInput)
	return verifyMessage(alg, pub, msg, sig)
}

// verifyMessage verifies sig over msg as signerOpts returns it (the digest
// of the signing input, or the input itself for EdDSA); pub has passed
// CheckKey for alg. Sign calls it with the digest it signed, so the signing
// input is hashed once.
func verifyMessage(alg Alg, pub crypto.PublicKey, msg, sig []byte) error {
	if alg == EdDSA {
		if len(sig) != ed25519.SignatureSize {
			return fmt.Errorf("%w: EdDSA signature is %d bytes, want %d", ErrSignatureInvalid, len(sig), ed25519.SignatureSize)
		}
		if !ed25519.Verify(pub.(ed25519.PublicKey), msg, sig) {
			return ErrSignatureInvalid
		}
		return nil
	}
	digest := msg

	switch alg {
	case ES256, ES384, ES512:
		size := alg.ecSize()
		if len(sig) != 2*size {
			return fmt.Errorf("%w: %s signature is %d bytes, want %d", ErrSignatureInvalid, alg, len(sig), 2*size)
		}
		// The DER that ecdsa.Verify would build from big.Ints, written
		// into a buffer on the stack.
		var der [2 + 2*(2+1+66) + 1]byte
		if !ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), digest, rawToDER(der[:0], sig)) {
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
