package ratelimit

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestWaitPaces: Wait takes the burst at once, then waits for each token;
// a wait longer than the deadline allows is refused at once; every Key of a
// name shares one bucket.
func TestWaitPaces(t *testing.T) {
	l := New(50, 2) // a token every 20ms
	k, again := l.Key("arn:k"), l.Key("arn:k")
	ctx := context.Background()
	start := time.Now()
	for range 2 {
		if err := k.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 15*time.Millisecond {
		t.Fatalf("the burst took %v", d)
	}
	if err := again.Wait(ctx); err != nil { // the third token, shared with k
		t.Fatal(err)
	}
	if d := time.Since(start); d < 15*time.Millisecond {
		t.Fatalf("the third token came after %v: the two Keys do not share a bucket", d)
	}
	if err := k.Wait(ctx); err != nil { // empty the bucket again
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if err := k.Wait(short); !errors.Is(err, ErrWouldExceedDeadline) {
		t.Fatalf("Wait with 1ms left = %v, want ErrWouldExceedDeadline", err)
	}
	if got := k.Limit(); got != 50 {
		t.Errorf("Limit = %v", got)
	}
	if err := l.Key("other").Wait(ctx); err != nil || time.Since(start) > time.Second {
		t.Errorf("another key waited: %v", err)
	}
}

// TestWaitCancelled: a cancelled context ends the wait with its error and
// gives the token back.
func TestWaitCancelled(t *testing.T) {
	l := New(1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.Wait(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, "k") }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if err := l.Wait(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a cancelled context = %v", err)
	}
}

// TestWaitUnlimited: an unlimited limiter never waits, but still reports a
// context that has ended.
func TestWaitUnlimited(t *testing.T) {
	l := New(math.Inf(1), 1)
	for range 1000 {
		if err := l.Wait(context.Background(), "k"); err != nil {
			t.Fatal(err)
		}
	}
	if l.Limit() != rate.Inf || l.Len() != 0 {
		t.Errorf("Limit %v, Len %d", l.Limit(), l.Len())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Wait(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait = %v", err)
	}
}

// TestWaitersKeepTheirBucket: a bucket with waiters queued is not swept
// before the last waiter's token time, so a newcomer cannot get a fresh,
// full bucket while they wait.
func TestWaitersKeepTheirBucket(t *testing.T) {
	l, c := newTest(1, 1, MaxKeys) // refills in 1s
	ctx := context.Background()
	// Three reservations, for now, +1s and +2s on the test clock; the last
	// two wait (on real timers) in the background until the test ends.
	if err := l.Wait(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range 2 {
		go l.Wait(wctx, "k")
	}
	time.Sleep(20 * time.Millisecond)
	c.advance(1500 * time.Millisecond) // past refill since the first call, before the last token
	for i := range 1000 {              // sweep every shard
		l.Allow(string(rune('a' + i%26)))
	}
	if ok, _ := l.Allow("k"); ok {
		t.Fatal("allowed: the bucket with waiters queued was swept")
	}
}

func TestBurstFor(t *testing.T) {
	for _, tt := range []struct {
		rate   float64
		window time.Duration
		want   int
	}{
		{30, 100 * time.Millisecond, 3},
		{100, time.Second, 100},
		{0.5, time.Second, 1},
		{1e300, time.Second, 1 << 20},
		{math.Inf(1), time.Second, 1},
	} {
		if got := BurstFor(tt.rate, tt.window); got != tt.want {
			t.Errorf("BurstFor(%g, %v) = %d, want %d", tt.rate, tt.window, got, tt.want)
		}
	}
}
