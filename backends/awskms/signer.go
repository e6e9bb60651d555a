//go:build !noawskms

package awskms

import (
	"context"
	"crypto"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/cardsign/cardsign/backends/internal/retry"
	"github.com/cardsign/cardsign/jose"
)

// signer is the crypto.Signer (and jose.ContextSigner) of one KMS key. It
// is safe for concurrent use: each signature is one KMS Sign request (plus
// retries), paced by the key's rate limiter.
type signer struct {
	b       *Backend
	client  *kms.Client
	arn     string // the key ARN, resolved at Open: every request names it
	scheme  scheme
	pub     crypto.PublicKey // read at Open
	limiter retry.Pacer
}

// Public returns the public key read when the key was opened.
func (s *signer) Public() crypto.PublicKey { return s.pub }

// Sign is SignContext without a deadline beyond the retry window.
func (s *signer) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return s.SignContext(context.Background(), rand, digest, opts)
}

// SignContext signs digest (for Ed25519, the whole message, at most
// MaxRawMessage bytes) with the KMS key. rand is ignored: KMS draws its own
// randomness. ctx bounds the rate-limit wait, every request and the retry
// pauses. ECDSA signatures are ASN.1 DER, as crypto.Signer promises (KMS
// returns DER). The response must name the key asked for, else the
// signature is discarded with a *KeyIDMismatchError.
func (s *signer) SignContext(ctx context.Context, _ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if err := s.checkInput(digest, opts); err != nil {
		s.b.stats.Failure()
		return nil, s.b.fail("sign with "+s.arn, err)
	}
	if s.b.closed.Load() {
		return nil, s.b.closedErr("Sign", s.arn)
	}
	in := &kms.SignInput{
		KeyId:            aws.String(s.arn),
		Message:          digest,
		MessageType:      s.scheme.msgType,
		SigningAlgorithm: s.scheme.signing,
	}
	var out *kms.SignOutput
	err := s.b.do(ctx, call{op: "Sign", key: s.arn, limiter: s.limiter, idempotent: true}, func(ctx context.Context) error {
		var err error
		out, err = s.client.Sign(ctx, in)
		return err
	})
	if err != nil {
		return nil, s.b.fail("sign with "+s.arn, kmsError(s.arn, err))
	}
	if got := aws.ToString(out.KeyId); got != s.arn {
		s.b.stats.Failure()
		s.b.log.Error("awskms: Sign response names another key; signature discarded", "key", s.arn, "response_key", got)
		return nil, &KeyIDMismatchError{Op: "Sign", Want: s.arn, Got: got}
	}
	if out.SigningAlgorithm != "" && out.SigningAlgorithm != s.scheme.signing {
		s.b.stats.Failure()
		return nil, fmt.Errorf("awskms: sign with %s: response is for signing algorithm %s, not %s; discarded", s.arn, out.SigningAlgorithm, s.scheme.signing)
	}
	if len(out.Signature) == 0 {
		s.b.stats.Failure()
		return nil, fmt.Errorf("awskms: sign with %s: empty signature in the response", s.arn)
	}
	s.b.stats.Signature()
	return out.Signature, nil
}

// checkInput refuses what the key cannot sign before asking KMS: a digest
// of the wrong hash or size, PSS options on an RS256 key (or their absence
// on a PS256 key), a PSS salt length KMS does not use, and Ed25519 input
// over MaxRawMessage.
func (s *signer) checkInput(msg []byte, opts crypto.SignerOpts) error {
	var h crypto.Hash
	if opts != nil {
		h = opts.HashFunc()
	}
	if s.scheme.alg == jose.EdDSA {
		if h != 0 {
			return fmt.Errorf("an Ed25519 key signs the message itself, not a %v digest", h)
		}
		if len(msg) > MaxRawMessage {
			return &MessageTooLargeError{Key: s.arn, Size: len(msg), Limit: MaxRawMessage}
		}
		return nil
	}
	if h != s.scheme.hash {
		return fmt.Errorf("%s key signs %v digests, not %v", s.scheme.alg, s.scheme.hash, h)
	}
	if len(msg) != h.Size() {
		return fmt.Errorf("digest is %d bytes, want %d for %v", len(msg), h.Size(), h)
	}
	pss, isPSS := opts.(*rsa.PSSOptions)
	switch {
	case s.scheme.alg == jose.PS256 && !isPSS:
		return errors.New("PS256 key: PKCS #1 v1.5 requested (open the key without ?alg=PS256 for RS256)")
	case s.scheme.alg == jose.PS256 && pss.SaltLength != rsa.PSSSaltLengthEqualsHash && pss.SaltLength != h.Size():
		return fmt.Errorf("AWS KMS RSASSA-PSS uses a salt as long as the hash (%d bytes), not %d", h.Size(), pss.SaltLength)
	case s.scheme.alg != jose.PS256 && isPSS:
		return fmt.Errorf("%s key: PSS requested (open an RSA key with ?alg=PS256 for PS256)", s.scheme.alg)
	}
	return nil
}
