package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/kms/apiv1/kmspb"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
)

// BenchmarkDaemonKMS measures SignCard through the real cardsignd with each
// cloud KMS fake answering after 20 ms, at concurrency 1 and 64. The figure
// to beat at 64 is 0.8 × 64/20ms = 2,560 signs/s (latency-bound, not
// serialized). Run: go test -run '^$' -bench DaemonKMS -benchtime 3000x ./cmd/cardsignd
func BenchmarkDaemonKMS(b *testing.B) {
	const latency = 20 * time.Millisecond
	gfake, err := gcpkmsfake.Start(gcpkmsfake.Options{Latency: latency})
	if err != nil {
		b.Fatal(err)
	}
	defer gfake.Close()
	const cryptoKey = "projects/bench/locations/global/keyRings/cardsign/cryptoKeys/bench"
	if _, err := gfake.AddKey(cryptoKey, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256); err != nil {
		b.Fatal(err)
	}
	afake, err := awskmsfake.Start(awskmsfake.Options{Latency: latency})
	if err != nil {
		b.Fatal(err)
	}
	defer afake.Close()
	providers := []struct {
		name, config string
		env          []string
	}{
		{"gcpkms", "keys:\n  backend: gcpkms\ngcpkms:\n  endpoint: " + gfake.Addr() + "\n  insecure: true\n  crypto_key: " + cryptoKey + "\n  rate_limit: 100000\naudit:\n  batch_size: 512\nlimits:\n  rate: 0\n", os.Environ()},
		{"awskms", "keys:\n  backend: awskms\nawskms:\n  endpoint: " + afake.URL() + "\n  region: us-east-1\n  key_spec: ECC_NIST_P256\n  rate_limit: 100000\nlimits:\n  rate: 0\n", awsEnv()},
	}
	card, err := os.ReadFile(cardFile("security.json"))
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range providers {
		for _, conc := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/concurrency=%d", p.name, conc), func(b *testing.B) {
				work := b.TempDir()
				cfg := filepath.Join(work, "c.yaml")
				if err := os.WriteFile(cfg, []byte(p.config), 0o600); err != nil {
					b.Fatal(err)
				}
				d := startDaemonEnv(b, p.env, filepath.Join(work, "data"), "--config", cfg)
				c := dialDaemon(b, d.grpc)
				if _, err := c.SignCard(context.Background(), &pb.SignCardRequest{Card: card}); err != nil {
					b.Fatal(err)
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for range conc {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							if _, err := c.SignCard(context.Background(), &pb.SignCardRequest{Card: card}); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				rate := float64(b.N) / time.Since(start).Seconds()
				b.ReportMetric(rate, "signs/s")
				b.ReportMetric(rate/(float64(conc)/latency.Seconds()), "of-bound")
				b.StopTimer()
				d.cmd.Process.Kill()
				<-d.exited
			})
		}
	}
}
