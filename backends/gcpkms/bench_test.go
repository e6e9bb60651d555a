//go:build !nogcpkms

package gcpkms

import (
	"crypto"
	"crypto/sha256"
	"fmt"
	"math"
	"testing"
	"time"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

// BenchmarkSign measures ES256 and EdDSA signatures per second through the backend
// against the fake at 20ms of injected latency, with 1 and 64 signatures in
// flight, as crypto.Signer and through jose.Sign (which also verifies).
// Latency-bound, the ceiling is p/20ms: 50/s and 3200/s; "of-bound" reports
// the share of it reached (issue #5's target at 64: ≥ 0.8). The rate limit is
// off: it is a quota guard, not what is measured.
//
//	go test -run '^$' -bench Sign -benchtime 3s ./backends/gcpkms/
func BenchmarkSign(b *testing.B) {
	const latency = 20 * time.Millisecond
	f := newFake(b, gcpkmsfake.Options{Latency: latency})
	backend, _ := newBackend(b, f, Config{RateLimit: math.Inf(1)})
	input := []byte("eyJhbGciOiJFUzI1NiJ9.e30")
	for _, k := range []struct {
		kms  kmspb.CryptoKeyVersion_CryptoKeyVersionAlgorithm
		alg  jose.Alg
		hash crypto.Hash
	}{
		{kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256, jose.ES256, crypto.SHA256},
		{kmspb.CryptoKeyVersion_EC_SIGN_ED25519, jose.EdDSA, 0},
	} {
		_, uri := addKey(b, f, k.kms)
		h, err := backend.Open(b.Context(), uri)
		if err != nil {
			b.Fatal(err)
		}
		msg := input
		if k.hash != 0 {
			d := sha256.Sum256(input)
			msg = d[:]
		}
		for _, p := range []int{1, 64} {
			bound := float64(p) / latency.Seconds()
			b.Run(fmt.Sprintf("%s/signer/p=%d", k.alg, p), func(b *testing.B) {
				rate := testsupport.Parallel(b, p, func() error { _, err := h.Signer.Sign(nil, msg, k.hash); return err })
				b.ReportMetric(rate/bound, "of-bound")
			})
			b.Run(fmt.Sprintf("%s/jose.Sign/p=%d", k.alg, p), func(b *testing.B) {
				rate := testsupport.Parallel(b, p, func() error { _, err := jose.Sign(b.Context(), h.Signer, k.alg, input); return err })
				b.ReportMetric(rate/bound, "of-bound")
			})
		}
	}
}
