package jose

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// ContextSigner is implemented by signers that do I/O (KMS, HSM) so a
// deadline reaches them. crypto.Signer has no context, and a signing request
// stuck on a throttled KMS must still honour the caller's deadline.
type ContextSigner interface {
	SignContext(ctx context.Context, rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error)
}

// signerOpts returns what is handed to crypto.Signer.Sign for alg, and the
// bytes it signs: a digest for ES*, RS256 and PS256, the whole signing input
// for EdDSA (RFC 8037 §3.1 signs the message, not a hash of it).
func signerOpts(alg Alg, signingInput []byte) ([]byte, crypto.SignerOpts) {
	if alg == EdDSA {
		return signingInput, crypto.Hash(0)
	}
	var digest []byte
	if alg.Hash() == crypto.SHA256 {
		// The common case without a hash.Hash on the heap.
		sum := sha256.Sum256(signingInput)
		digest = sum[:]
	} else {
		h := alg.Hash().New()
		h.Write(signingInput)
		digest = h.Sum(nil)
	}
	if alg == PS256 {
		// RFC 7518 §3.5: salt length equals the hash length. PSSSaltLengthAuto
		// (Go's default for signing) would use the maximum, which verifiers
		// that insist on the hash length reject: WebCrypto verifies with an
		// explicit saltLength, and the npm package jose (under @a2a-js/sdk)
		// passes the hash length. go-jose would not notice: it verifies with
		// PSSSaltLengthAuto, which accepts any salt length.
		return digest, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA256}
	}
	return digest, alg.Hash()
}

// Sign produces the JWS signature bytes over signingInput, which must already
// be "b64url(protected).b64url(payload)". It uses s.SignContext when s is a
// ContextSigner, converts ECDSA output to raw r||s, and verifies the result
// with s.Public() before returning it: a signature that does not verify is
// reported as a *VerifyError and never returned.
func Sign(ctx context.Context, s crypto.Signer, alg Alg, signingInput []byte) ([]byte, error) {
	if s == nil {
		return nil, errors.New("jose: sign: nil signer")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("jose: sign: %w", err)
	}
	pub := s.Public()
	if err := CheckKey(alg, pub); err != nil {
		return nil, fmt.Errorf("jose: sign: %w", err)
	}
	msg, opts := signerOpts(alg, signingInput)
	// The backend gets a copy: the check below is against the digest
	// computed here, whatever a backend does with the buffer it is given.
	toSign := bytes.Clone(msg)
	var (
		sig []byte
		err error
	)
	if cs, ok := s.(ContextSigner); ok {
		sig, err = cs.SignContext(ctx, rand.Reader, toSign, opts)
	} else {
		sig, err = s.Sign(rand.Reader, toSign, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("jose: sign %s with %s key: %w", alg, KeyType(pub), err)
	}
	if size := alg.ecSize(); size > 0 {
		if sig, err = ecdsaToRaw(sig, size); err != nil {
			return nil, fmt.Errorf("jose: sign %s: %w", alg, err)
		}
	}
	if err := verifyMessage(alg, pub, msg, sig); err != nil {
		return nil, &VerifyError{Alg: alg, KeyType: KeyType(pub), Err: err}
	}
	return sig, nil
}
