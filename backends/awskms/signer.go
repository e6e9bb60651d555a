//go:build !noawskms

package awskms

import (
	"context"
	"crypto"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/cardsign/cardsign/backends"
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

// checkInput refuses what the key cannot sign before asking KMS
// (backends.CheckSignerOpts), and Ed25519 input over MaxRawMessage.
func (s *signer) checkInput(msg []byte, opts crypto.SignerOpts) error {
	if err := backends.CheckSignerOpts(s.scheme.alg, msg, opts); err != nil {
		return err
	}
	if s.scheme.alg == jose.EdDSA && len(msg) > MaxRawMessage {
		return &MessageTooLargeError{Key: s.arn, Size: len(msg), Limit: MaxRawMessage}
	}
	return nil
}
