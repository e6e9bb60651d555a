package backends

import (
	"crypto"
	"crypto/rsa"
	"errors"
	"fmt"

	"github.com/cardsign/cardsign/jose"
)

// CheckSignerOpts refuses, before a backend asks its KMS, a signature that
// a key of alg would make differently from what the caller asks: nil opts,
// a digest of another hash or size, PSS options for an RS256 key or their
// absence for PS256, a PSS salt other than the digest's length (the salt
// the KMSes use), or a digest (Ed25519ph) for an EdDSA key, which signs the
// message itself. Refusing here costs no request and gives the reason.
func CheckSignerOpts(alg jose.Alg, digest []byte, opts crypto.SignerOpts) error {
	if opts == nil {
		return errors.New("nil crypto.SignerOpts")
	}
	h, want := opts.HashFunc(), alg.Hash()
	switch {
	case h != want && want == 0:
		return fmt.Errorf("the %s key signs the message itself, not a %v digest", alg, h)
	case h != want:
		return fmt.Errorf("the %s key signs %v digests, not %v", alg, want, h)
	case h == 0:
		return nil
	case len(digest) != h.Size():
		return fmt.Errorf("the %v digest is %d bytes, want %d", h, len(digest), h.Size())
	}
	pss, isPSS := opts.(*rsa.PSSOptions)
	switch {
	case alg == jose.PS256 && !isPSS:
		return errors.New("the PS256 key signs with RSA-PSS, but PKCS #1 v1.5 requested (pass *rsa.PSSOptions, or open the key without ?alg=PS256 for RS256)")
	case alg != jose.PS256 && isPSS:
		return fmt.Errorf("the %s key does not sign with RSA-PSS (open an RSA key with ?alg=PS256 for PS256)", alg)
	case isPSS && pss.SaltLength != rsa.PSSSaltLengthEqualsHash && pss.SaltLength != h.Size():
		return fmt.Errorf("RSA-PSS salt length %d: the key signs with a salt as long as the hash (%d bytes)", pss.SaltLength, h.Size())
	}
	return nil
}
