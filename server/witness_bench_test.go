package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/internal/witnesstest"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/witness"
)

// BenchmarkSignWitnessed is a sign through the authority (no transport)
// with 0 and with 3 real witnesses (litewitness on loopback, quorum 2,
// log.witness_wait mode wait): each sign returns once a checkpoint with its
// signature carries the quorum. It reports each sign's latency (p50-ms,
// p99-ms; 16 callers at once) and the authority's CPU per card
// (cpu-ns/op; the witnesses' own CPU is in their processes, not counted).
// scripts/bench runs it (BENCH_ONLY=witness).
func BenchmarkSignWitnessed(b *testing.B) {
	card := testsupport.Card(b, "spec-sample.json")
	for _, n := range []int{0, 3} {
		b.Run(fmt.Sprintf("witnesses=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			logSigner := testLogSigner(b)
			var eps []witness.Endpoint
			var keys []string
			for i := range n {
				w := witnesstest.Start(b, fmt.Sprintf("w%d.bench.test", i+1))
				w.AddLog(logSigner.Origin(), logSigner.SigningKeys()[0])
				k, err := transparency.ParseWitnessKey(w.VKey)
				if err != nil {
					b.Fatal(err)
				}
				eps = append(eps, witness.Endpoint{Witness: k, URL: w.URL})
				keys = append(keys, w.VKey)
			}
			var policy transparency.WitnessPolicy
			if n > 0 {
				var err error
				if policy, err = transparency.NewWitnessPolicy(keys, 2); err != nil {
					b.Fatal(err)
				}
			}
			a := newAuthorityWith(b, openStore(b, dir), dir, slog.New(slog.DiscardHandler), func(c *Config) {
				c.AuditBatch = 512
				c.Log = logSigner
				c.Witnesses, c.WitnessPolicy = eps, policy
				c.WitnessWait = WitnessWait{Mode: WitnessWaitWait, Timeout: 10 * time.Second}
			})
			ctx, cancel := context.WithCancel(context.Background())
			duties := make(chan struct{})
			go func() { defer close(duties); a.RunDuties(ctx) }()
			defer func() { cancel(); <-duties }()
			req := SignRequest{Card: card, StripUnknown: true, Caller: "bench", Identity: access.Identity{Name: "bench"}, RequestID: "r"}
			if _, err := a.Sign(b.Context(), req); err != nil { // the first round under the lease
				b.Fatal(err)
			}
			var mu sync.Mutex
			lat := make([]time.Duration, 0, b.N)
			sample := make([]*Signed, 0, 64) // checked after the timer: verifying is the client's cost
			b.SetParallelism(8)              // 16 callers on 2 cores
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					start := time.Now()
					signed, err := a.Sign(b.Context(), req)
					d := time.Since(start)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					lat = append(lat, d)
					if n > 0 && len(sample) < cap(sample) && len(lat)%16 == 0 {
						sample = append(sample, signed)
					}
					mu.Unlock()
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			for _, signed := range sample {
				if len(policy.Vouches([]byte(proofCheckpoint(b, signed)))) < 2 {
					b.Fatal("a sign returned a proof without the witnesses' quorum")
				}
			}
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
			}
		})
	}
}

// proofCheckpoint is the checkpoint of the first signature's proof.
func proofCheckpoint(b *testing.B, s *Signed) string {
	proofs, err := signer.Proofs(s.Result.Card, strictjson.Limits{})
	if err != nil || len(proofs) == 0 || proofs[0] == "" {
		b.Fatalf("no proof: %v", err)
	}
	p, err := transparency.ParseProof(proofs[0])
	if err != nil {
		b.Fatal(err)
	}
	return string(p.Checkpoint)
}
