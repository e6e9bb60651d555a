// Package path: github.com/cardsign/cardsign/server (./server).
//
//	go test -run '^$' -bench ResignStorm -benchtime 1x ./server
//	CARDSIGN_RESIGN_CARDS=2000 go test -run '^$' -bench 'ResignStorm/file' -benchtime 1x ./server
//
// BenchmarkResignStorm registers N cards (CARDSIGN_RESIGN_CARDS, 10,000 by
// default; setup, not timed), rotates the signing key, activates the new
// one and revokes the old one, then times the registry's re-signing duty
// until every registered card carries the new key alone, while a pipeline
// signs resignStormPipelineRate cards per second through the same
// authority. Sub-benchmarks: awskms (the real AWS SDK client against the
// AWS KMS fake over loopback HTTP, 20 ms answers, a sign quota of
// resignStormQuota per second; registry.resign_rate set to it) and file
// (file keys, no quota). Metrics: cards, quota/s, s-to-new-key, bound-s
// (1.1 × N / quota, the target), cards/s, sign-p99-ms (the pipeline
// signs made during the storm), signs (how many); awskms also reports
// throttled, the Sign requests the quota refused (each retried).
package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/store"
)

// The storm's settings: the AWS KMS quota for asymmetric Sign (per second,
// and the fake's burst, a tenth of a second's worth), the latency of a
// cloud KMS answer, and the pipeline's steady load.
const (
	resignStormQuota        = 300
	resignStormBurst        = resignStormQuota / 10
	resignStormLatency      = 20 * time.Millisecond
	resignStormPipelineRate = 20
)

// resignStormCards is N: CARDSIGN_RESIGN_CARDS, 10,000 by default.
func resignStormCards(b *testing.B) int {
	n := 10_000
	if v := os.Getenv("CARDSIGN_RESIGN_CARDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("CARDSIGN_RESIGN_CARDS=%q: want a positive number of cards", v)
		}
	}
	return n
}

func BenchmarkResignStorm(b *testing.B) {
	n := resignStormCards(b)
	b.Run("awskms", func(b *testing.B) {
		fake, err := awskmsfake.Start(awskmsfake.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = fake.Close() })
		a := newAWSAuthority(b, fake.URL(), roomFor(n), func(c *Config) { c.RegistryResignRate = resignStormQuota })
		for range b.N {
			b.StopTimer()
			// Registration is setup: at the fake's full speed.
			fake.SetLatency(0)
			fake.SetSignQuota(0, 0)
			registerStorm(b, a, n)
			fake.SetLatency(resignStormLatency)
			fake.SetSignQuota(resignStormQuota, resignStormBurst)
			b.StartTimer()
			runStorm(b, a, n)
			b.ReportMetric(float64(fake.Throttled()), "throttled")
			b.StartTimer()
		}
		b.ReportMetric(resignStormQuota, "quota/s")
		b.ReportMetric(1.1*float64(n)/resignStormQuota, "bound-s")
	})
	b.Run("file", func(b *testing.B) {
		dir := b.TempDir()
		a := newAuthorityWith(b, openStore(b, dir), dir, slog.New(slog.DiscardHandler), roomFor(n))
		for range b.N {
			b.StopTimer()
			registerStorm(b, a, n)
			b.StartTimer()
			runStorm(b, a, n)
			b.StartTimer()
		}
	})
}

// roomFor sets the registry's quotas to hold n agents of one caller.
func roomFor(n int) func(*Config) {
	return func(c *Config) { c.RegistryMaxAgents, c.RegistryMaxAgentsPerCaller = max(n, 1000), max(n, 1000) }
}

// registerStorm registers n agents' cards signed by the active key, 8 at a
// time: one card signed and audited, then stored under each agent id as
// Sign stores it (Registry.Register). Registering each through Sign would
// count the agents for the quotas on every card (a count over every
// agent), which makes the setup of 10,000 cards take minutes.
func registerStorm(b testing.TB, a *Authority, n int) {
	b.Helper()
	ctx, cancel := context.WithCancelCause(b.Context())
	defer cancel(nil)
	signed, err := a.Sign(ctx, SignRequest{Card: registryCardB(b), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"}, RequestID: "register"})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				reg := &Registration{AgentID: fmt.Sprintf("agent-%05d", i), Visibility: store.Private}
				if _, err := a.registry.Register(ctx, reg, signed.Result, registry.Options{}, "token:ci", signed.Audit[0].Seq); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		b.Fatalf("registering %d cards: %v", n, err)
	}
}

// runStorm rotates the key, activates the new one and revokes the old one,
// then runs duty rounds until the registry is re-signed, with the pipeline
// signing meanwhile; it reports the storm's metrics and checks, in the
// store, that every card carries the new key alone.
func runStorm(b *testing.B, a *Authority, n int) {
	b.Helper()
	ctx := b.Context()
	k2 := stormKeys(b, a)
	stop := make(chan struct{})
	pipeline := make(chan []time.Duration)
	go func() { pipeline <- signSteadily(ctx, b, a, stop) }()
	start := time.Now()
	for round := 0; ; round++ {
		err := a.dutyRound(ctx)
		if err == nil {
			// A round asks for the next at once (RunDuties' poke) while
			// its re-signing pass is unfinished after its slice.
			select {
			case <-a.poke:
				continue
			default:
			}
			break
		}
		if round == 3 {
			b.Fatal(err)
		}
		b.Logf("duty round: %v", err)
	}
	took := time.Since(start)
	close(stop)
	lat := <-pipeline
	b.StopTimer()

	if carry := cardsCarryingOnly(b, a, k2); carry != n {
		b.Fatalf("%d of %d cards carry %s alone after the storm", carry, n, k2)
	}
	b.ReportMetric(float64(n), "cards")
	b.ReportMetric(took.Seconds(), "s-to-new-key")
	b.ReportMetric(float64(n)/took.Seconds(), "cards/s")
	b.ReportMetric(float64(len(lat)), "signs")
	b.ReportMetric(stormP99(lat).Seconds()*1000, "sign-p99-ms")
}

// signSteadily signs a card every 1/resignStormPipelineRate s, as a
// pipeline does, until stop; it returns each sign's latency.
func signSteadily(ctx context.Context, b *testing.B, a *Authority, stop <-chan struct{}) []time.Duration {
	card := registryCardB(b)
	tick := time.NewTicker(time.Second / resignStormPipelineRate)
	defer tick.Stop()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-stop:
			wg.Wait()
			return lat
		case <-tick.C:
		}
		wg.Go(func() {
			start := time.Now()
			if _, err := a.Sign(ctx, SignRequest{Card: card, Caller: "token:pipeline", Identity: access.Identity{Name: "token:pipeline"}, RequestID: "pipeline"}); err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			lat = append(lat, time.Since(start))
			mu.Unlock()
		})
	}
}

// cardsCarryingOnly counts the registered cards whose signatures are by kid
// alone.
func cardsCarryingOnly(b testing.TB, a *Authority, kid string) int {
	b.Helper()
	n := 0
	for after := ""; ; {
		page, err := a.registry.List(b.Context(), after, 500)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range page {
			after = c.ID
			if slices.Equal(c.KIDs, []string{kid}) {
				n++
			}
		}
		if len(page) < 500 {
			return n
		}
	}
}

// stormP99 is the 99th percentile of ds (0 for none).
func stormP99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[min(len(s)-1, len(s)*99/100)]
}
