//go:build !noazurekv

package azurekv

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"fmt"
	"io"

	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/internal/retry"
	"github.com/cardsign/cardsign/jose"
)

// signer is the crypto.Signer (and jose.ContextSigner) of one key version.
// It is safe for concurrent use.
type signer struct {
	b       *Backend
	client  *azkeys.Client
	ref     keyRef // version pinned: every request names it
	alg     jose.Alg
	pub     crypto.PublicKey
	limiter retry.Pacer
}

// Public returns the public key read when the key was opened.
func (s *signer) Public() crypto.PublicKey { return s.pub }

// Sign is SignContext without a deadline beyond the retry window.
func (s *signer) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return s.SignContext(context.Background(), rand, digest, opts)
}

// SignContext signs digest with the pinned key version. Key Vault returns
// ECDSA signatures as raw r||s; they are returned as DER, as crypto.Signer
// promises. The response must name the version asked for.
func (s *signer) SignContext(ctx context.Context, _ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if err := backends.CheckSignerOpts(s.alg, digest, opts); err != nil {
		s.b.stats.Failure()
		return nil, fmt.Errorf("azurekv: sign with %s: %w", s.ref, err)
	}
	if s.b.closed.Load() {
		return nil, &UnavailableError{Op: "Sign", Key: s.ref.String(), Err: ErrClosed}
	}
	alg, err := signAlg(s.alg)
	if err != nil {
		return nil, err
	}
	var resp azkeys.SignResponse
	err = s.b.do(ctx, call{op: "Sign", key: s.ref.String(), limiter: s.limiter}, func(ctx context.Context) error {
		var err error
		resp, err = s.client.Sign(ctx, s.ref.name, s.ref.version, azkeys.SignParameters{Algorithm: &alg, Value: digest}, nil)
		return err
	})
	if err != nil {
		return nil, s.b.fail("Sign", s.ref.String(), err)
	}
	if name, version := kidParts(resp.KID); name != s.ref.name || version != s.ref.version {
		s.b.stats.Failure()
		got := ""
		if resp.KID != nil {
			got = string(*resp.KID)
		}
		s.b.log.Error("azurekv: Sign response names another key version; signature discarded", "key", s.ref.String(), "response_kid", got)
		return nil, fmt.Errorf("azurekv: sign with %s: the response names %q; discarded", s.ref, got)
	}
	sig := resp.Result
	if len(sig) == 0 {
		s.b.stats.Failure()
		return nil, fmt.Errorf("azurekv: sign with %s: empty signature in the response", s.ref)
	}
	if k, ok := s.pub.(*ecdsa.PublicKey); ok {
		if want := 2 * ((k.Curve.Params().BitSize + 7) / 8); len(sig) != want {
			s.b.stats.Failure()
			return nil, fmt.Errorf("azurekv: sign with %s: the r||s signature is %d bytes, want %d; discarded", s.ref, len(sig), want)
		}
		if sig, err = jose.ECDSARawToDER(sig); err != nil {
			s.b.stats.Failure()
			return nil, fmt.Errorf("azurekv: sign with %s: %w", s.ref, err)
		}
	}
	s.b.stats.Signature()
	return sig, nil
}
