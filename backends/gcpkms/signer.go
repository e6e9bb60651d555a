//go:build !nogcpkms

package gcpkms

import (
	"context"
	"crypto"
	"fmt"
	"io"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/internal/retry"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// signer is the crypto.Signer (and jose.ContextSigner) of one key version.
// It is safe for concurrent use.
type signer struct {
	b       *Backend
	name    string // the CryptoKeyVersion resource name
	alg     algorithm
	pub     crypto.PublicKey
	limiter retry.Pacer
}

// Public returns the public key read when the key was opened.
func (s *signer) Public() crypto.PublicKey { return s.pub }

// Sign is SignContext without a deadline; retries then end after
// unboundedCallLimit.
func (s *signer) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return s.SignContext(context.Background(), rand, digest, opts)
}

// SignContext signs in Cloud KMS: digest is the message digest for EC and
// RSA versions (sent with digest_crc32c), the whole message for Ed25519 (sent
// as data with data_crc32c). rand is unused: Cloud KMS draws its own
// randomness. ECDSA signatures are ASN.1 DER, as crypto.Signer promises.
// The response must confirm the request checksum, carry a signature_crc32c
// that matches and name this key version, or it is discarded (see
// IntegrityError). ctx bounds the rate-limit wait, every attempt and the
// retries.
func (s *signer) SignContext(ctx context.Context, _ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if err := backends.CheckSignerOpts(s.alg.jose, digest, opts); err != nil {
		return nil, fmt.Errorf("gcpkms: sign with %s: %w", s.name, err)
	}
	req := &kmspb.AsymmetricSignRequest{Name: s.name}
	if s.alg.hash == 0 {
		req.Data, req.DataCrc32C = digest, wrapperspb.Int64(crc32c(digest))
	} else {
		req.Digest, req.DigestCrc32C = kmsDigest(s.alg.hash, digest), wrapperspb.Int64(crc32c(digest))
	}
	var sig []byte
	err := s.b.call(ctx, op{what: "sign with", name: s.name, limiter: s.limiter}, func(ctx context.Context) error {
		resp, err := s.b.client.AsymmetricSign(ctx, req)
		if err != nil {
			return err
		}
		if err := checkSignature(s.name, s.alg.hash == 0, resp); err != nil {
			return err
		}
		sig = resp.GetSignature()
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.b.stats.Signature()
	return sig, nil
}

// checkSignature checks an AsymmetricSign response for version name; data
// tells whether the request carried data (Ed25519) rather than a digest.
func checkSignature(name string, data bool, resp *kmspb.AsymmetricSignResponse) error {
	if resp.GetName() != name {
		return &IntegrityError{Name: name, Field: "name", Reason: fmt.Sprintf("signed by %q", resp.GetName())}
	}
	if data && !resp.GetVerifiedDataCrc32C() {
		return &IntegrityError{Name: name, Field: "verified_data_crc32c", Reason: "Cloud KMS did not confirm the data checksum", retry: true}
	}
	if !data && !resp.GetVerifiedDigestCrc32C() {
		return &IntegrityError{Name: name, Field: "verified_digest_crc32c", Reason: "Cloud KMS did not confirm the digest checksum", retry: true}
	}
	if resp.GetSignatureCrc32C() == nil {
		return &IntegrityError{Name: name, Field: "signature_crc32c", Reason: "missing", retry: true}
	}
	if got := crc32c(resp.GetSignature()); got != resp.GetSignatureCrc32C().GetValue() {
		return &IntegrityError{Name: name, Field: "signature_crc32c", Reason: fmt.Sprintf("the signature's CRC32C is %d, the response says %d", got, resp.GetSignatureCrc32C().GetValue()), retry: true}
	}
	if len(resp.GetSignature()) == 0 {
		return &IntegrityError{Name: name, Field: "signature", Reason: "empty", retry: true}
	}
	return nil
}
