package ratelimit

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a manual clock, safe for concurrent use.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time {
	return time.Unix(1_767_225_600, c.ns.Load()) // from 2026-01-01
}
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func newTest(rate float64, burst, maxKeys int) (*Limiter, *clock) {
	c := new(clock)
	return newLimiter(rate, burst, maxKeys, c.now), c
}

// take calls Allow n times and returns how many were allowed and the last
// retry delay.
func take(l *Limiter, key string, n int) (allowed int, retry time.Duration) {
	for range n {
		ok, d := l.Allow(key)
		if ok {
			allowed++
			if d != 0 {
				panic(fmt.Sprintf("allowed with retryAfter %v", d))
			}
		}
		retry = d
	}
	return allowed, retry
}

func TestBurstThenRefusal(t *testing.T) {
	tests := []struct {
		rate      float64
		burst     int
		wantRetry time.Duration
	}{
		{10, 3, 100 * time.Millisecond},
		{1, 1, time.Second},
		{0.5, 2, 2 * time.Second},
		{1000, 5, time.Millisecond},
		{3, 0, 333333334 * time.Nanosecond}, // burst 0 is taken as 1; rounded up
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("rate=%v,burst=%d", tt.rate, tt.burst), func(t *testing.T) {
			l, _ := newTest(tt.rate, tt.burst, MaxKeys)
			allowed, retry := take(l, "ci", max(tt.burst, 1)+1)
			if allowed != max(tt.burst, 1) {
				t.Errorf("allowed %d of a burst of %d", allowed, tt.burst)
			}
			if retry != tt.wantRetry {
				t.Errorf("retryAfter = %v, want %v", retry, tt.wantRetry)
			}
		})
	}
}

func TestRetryAfterShrinks(t *testing.T) {
	l, c := newTest(10, 1, MaxKeys)
	take(l, "ci", 1)
	c.advance(30 * time.Millisecond)
	if ok, d := l.Allow("ci"); ok || d != 70*time.Millisecond {
		t.Errorf("Allow 30ms after draining = %v, %v; want false, 70ms", ok, d)
	}
}

func TestRefill(t *testing.T) {
	l, c := newTest(10, 2, MaxKeys)
	if n, _ := take(l, "ci", 3); n != 2 {
		t.Fatalf("allowed %d, want 2", n)
	}
	c.advance(99 * time.Millisecond)
	if ok, _ := l.Allow("ci"); ok {
		t.Fatal("allowed before a token refilled")
	}
	c.advance(time.Millisecond)
	if ok, _ := l.Allow("ci"); !ok {
		t.Fatal("refused after a token refilled")
	}
	c.advance(time.Hour)
	if n, _ := take(l, "ci", 5); n != 2 {
		t.Fatalf("after an hour allowed %d, want the burst of 2", n)
	}
}

// TestRefillRealClock waits for the delay Allow reports, with the real clock.
func TestRefillRealClock(t *testing.T) {
	l := New(50, 1)
	if ok, _ := l.Allow("ci"); !ok {
		t.Fatal("first call refused")
	}
	ok, d := l.Allow("ci")
	if ok || d <= 0 || d > 20*time.Millisecond {
		t.Fatalf("second call = %v, %v; want false and at most 20ms", ok, d)
	}
	time.Sleep(d)
	if ok, d := l.Allow("ci"); !ok {
		t.Fatalf("refused after waiting retryAfter; retry %v", d)
	}
}

func TestIndependentKeys(t *testing.T) {
	l, _ := newTest(1, 2, MaxKeys)
	if n, _ := take(l, "team-a", 5); n != 2 {
		t.Fatalf("team-a allowed %d, want 2", n)
	}
	if n, _ := take(l, "team-b", 5); n != 2 {
		t.Fatalf("team-b allowed %d after team-a drained its bucket, want 2", n)
	}
	if l.Len() != 2 {
		t.Errorf("Len = %d, want 2", l.Len())
	}
}

func TestUnlimited(t *testing.T) {
	for _, rate := range []float64{0, -1, math.Inf(1)} {
		l, _ := newTest(rate, 1, MaxKeys)
		for i := range 1000 {
			if ok, d := l.Allow(fmt.Sprint(i % 3)); !ok || d != 0 {
				t.Fatalf("rate %v: Allow = %v, %v", rate, ok, d)
			}
		}
		if l.Len() != 0 {
			t.Errorf("rate %v: Len = %d, want 0", rate, l.Len())
		}
	}
}

func TestNaNPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New(NaN, 1) did not panic")
		}
	}()
	New(math.NaN(), 1)
}

// TestEvictionBoundsLen: under churn of distinct keys, buckets that have
// refilled are dropped, so Len tracks the keys of the last few seconds, not
// all keys ever seen.
func TestEvictionBoundsLen(t *testing.T) {
	l, c := newTest(10, 1, MaxKeys) // a bucket refills in 100ms
	const keys = 100_000
	peak := 0
	for i := range keys {
		l.Allow(fmt.Sprintf("cert-%d", i))
		c.advance(time.Millisecond) // 1000 new keys a second
		if i%16 == 0 {
			peak = max(peak, l.Len())
		}
	}
	// Each shard sweeps at least once a second, so at most about two
	// seconds of keys are tracked.
	if peak > 2500 {
		t.Errorf("Len peaked at %d for %d keys, want at most 2500", peak, keys)
	}
}

// TestNoEvictionBeforeRefill: a drained bucket is kept until it has
// refilled, or eviction would hand out extra tokens.
func TestNoEvictionBeforeRefill(t *testing.T) {
	l, c := newTest(1, 2, MaxKeys) // refills in 2s
	take(l, "ci", 2)
	c.advance(1500 * time.Millisecond) // past the sweep interval: the next call sweeps
	if n, _ := take(l, "ci", 3); n != 1 {
		t.Fatalf("allowed %d after 1.5s, want 1 (a dropped bucket would allow 2)", n)
	}
	// 2.6s after the bucket was made but 1.1s after it was last used: it
	// holds 1.6 tokens, and is swept but not dropped.
	c.advance(1100 * time.Millisecond)
	if n, _ := take(l, "ci", 3); n != 1 {
		t.Fatalf("allowed %d after 2.6s, want 1 (a dropped bucket would allow 2)", n)
	}
	for i := range 1000 { // sweep every shard
		l.Allow(fmt.Sprint(i))
	}
	if ok, _ := l.Allow("ci"); ok {
		t.Fatal("allowed again: the drained bucket was dropped")
	}
	c.advance(2 * time.Second)
	l.Allow("other")
	c.advance(2 * time.Second)
	for i := range 1000 {
		l.Allow(fmt.Sprint("x", i))
	}
	if n := l.Len(); n > 1000 {
		t.Errorf("Len = %d after every old key went idle, want at most the 1000 new keys", n)
	}
}

// TestCap: with the clock stopped nothing can be swept; past the cap new
// keys share the overflow bucket, and keys already tracked keep their own.
func TestCap(t *testing.T) {
	l, c := newTest(1, 1, 64)
	if ok, _ := l.Allow("tracked"); !ok {
		t.Fatal("first key refused")
	}
	for i := range 10_000 {
		l.Allow(fmt.Sprint("flood-", i))
	}
	if n := l.Len(); n > 64 {
		t.Fatalf("Len = %d, want at most the cap of 64", n)
	}
	// The flood has drained the overflow bucket, so a new key is refused…
	if ok, _ := l.Allow("newcomer"); ok {
		t.Error("a new key past the cap got a token of its own")
	}
	// …while the tracked key still has its own bucket.
	c.advance(time.Second)
	if ok, _ := l.Allow("tracked"); !ok {
		t.Error("a tracked key was refused after its bucket refilled")
	}
}

// TestConcurrent: many goroutines on a few keys, with the clock stopped,
// get exactly the burst of each key between them. Run with -race.
func TestConcurrent(t *testing.T) {
	const burst, keys, goroutines = 50, 4, 16
	l, _ := newTest(1, burst, MaxKeys)
	var allowed [keys]atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range 100 {
				k := (g + i) % keys
				if ok, _ := l.Allow(fmt.Sprint("key-", k)); ok {
					allowed[k].Add(1)
				}
				_ = l.Len()
			}
		})
	}
	wg.Wait()
	for k := range allowed {
		if n := allowed[k].Load(); n != burst {
			t.Errorf("key %d: allowed %d, want %d", k, n, burst)
		}
	}
}

func BenchmarkAllow(b *testing.B) {
	l := New(1e9, 1_000_000)
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		// Each goroutine has its own keys, as distinct callers would.
		g := next.Add(1)
		keys := make([]string, 256)
		for i := range keys {
			keys[i] = fmt.Sprintf("spiffe://example.org/ci/team-%d/pipeline-%d", g, i)
		}
		i := 0
		for pb.Next() {
			l.Allow(keys[i%len(keys)])
			i++
		}
	})
}
