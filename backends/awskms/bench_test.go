//go:build !noawskms

package awskms

import (
	"crypto"
	"crypto/sha256"
	"math"
	"testing"
	"time"

	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

// BenchmarkSign measures ES256 signatures per second through the backend
// with 20 ms injected KMS latency, at 1 and 64 concurrent signers: through
// jose.Sign (digest, SignContext, KMS Sign over HTTP to the fake, DER to
// r||s, local verification) and through SignContext alone. The fake runs
// in the same process, so on a small machine its CPU (HTTP, JSON, ECDSA)
// competes with the client's. The target at 64 is latency-bound throughput:
// ≥ 0.8 × 64 / 20 ms = 2560 sig/s. The per-key rate limit is off (+Inf)
// for these, since it exists to cap throughput; "default-limit" shows the
// cap of the default 100/s.
//
//	go test -run '^$' -bench Sign ./backends/awskms/
func BenchmarkSign(b *testing.B) {
	const latency = 20 * time.Millisecond
	input := signingInput(1000)
	digest := sha256.Sum256(input)
	for _, bc := range []struct {
		name     string
		rate     float64
		p        int
		joseSign bool // through jose.Sign, else SignContext alone
	}{
		{"jose.Sign/p=1", math.Inf(1), 1, true},
		{"jose.Sign/p=64", math.Inf(1), 64, true},
		{"signer/p=1", math.Inf(1), 1, false},
		{"signer/p=64", math.Inf(1), 64, false},
		{"jose.Sign/default-limit/p=64", 0, 64, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnv(b, Config{RateLimit: bc.rate}, awskmsfake.Options{})
			h := e.open(b, "awskms:///"+e.createKey(b, "ECC_NIST_P256"))
			cs := h.Signer.(jose.ContextSigner)
			e.fake.SetLatency(latency)
			testsupport.Parallel(b, bc.p, func() error {
				var err error
				if bc.joseSign {
					_, err = jose.Sign(b.Context(), h.Signer, h.Alg, input)
				} else {
					_, err = cs.SignContext(b.Context(), nil, digest[:], crypto.SHA256)
				}
				return err
			})
			if bc.p > 1 {
				target := 0.8 * float64(bc.p) / latency.Seconds()
				b.ReportMetric(target, "target-sig/s")
			}
			s := e.b.Stats()
			b.ReportMetric(float64(s.Latency.Mean().Microseconds())/1000, "kms-ms/req")
		})
	}
}
