package registry

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPaceWindow: the window of re-signatures in flight is halved when the
// backend reports throttling (once per resignCutSpacing, whatever the
// number of throttled answers), and grows by one after a window's worth
// of signatures without, up to the concurrency set.
func TestPaceWindow(t *testing.T) {
	type step struct {
		throttles uint64        // the backends' count when the signature ends
		after     time.Duration // the clock when it ends, from the start
		want      int           // the window after it
	}
	tests := []struct {
		name  string
		max   int
		steps []step
	}{
		{"throttling halves", 8, []step{{1, 0, 4}, {2, time.Second, 2}, {3, 2 * time.Second, 1}, {4, 3 * time.Second, 1}}},
		{"one cut per spacing", 8, []step{{1, 0, 4}, {5, 100 * time.Millisecond, 4}, {6, 300 * time.Millisecond, 2}}},
		{"grows a window at a time", 4, []step{
			{1, 0, 2},            // cut
			{1, 0, 2}, {1, 0, 3}, // two signatures grow a window of 2
			{1, 0, 3}, {1, 0, 3}, {1, 0, 4}, // three a window of 3
			{1, 0, 4}, {1, 0, 4}, {1, 0, 4}, {1, 0, 4}, {1, 0, 4}, // never beyond the max
		}},
		{"no throttling, no cut", 3, []step{{0, 0, 3}, {0, time.Second, 3}}},
		// The keys moved to a backend with a smaller count: a new base;
		// throttling counted from it cuts again.
		{"a count that falls is a new base", 8, []step{{5, 0, 4}, {2, time.Second, 4}, {3, 2 * time.Second, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var throttles uint64
			start := time.Unix(1_700_000_000, 0)
			now := start.Add(-time.Hour)
			p := newPace(0, tt.max, func() uint64 { return throttles }, func() time.Time { return now })
			if p.Window() != tt.max {
				t.Fatalf("window %d at the start, want %d", p.Window(), tt.max)
			}
			for i, s := range tt.steps {
				if err := p.Acquire(t.Context(), 1); err != nil {
					t.Fatal(err)
				}
				throttles, now = s.throttles, start.Add(s.after)
				p.Done()
				if got := p.Window(); got != s.want {
					t.Fatalf("step %d: window %d, want %d", i, got, s.want)
				}
			}
		})
	}
}

// TestPaceBoundsInFlight: Acquire waits while the window is full, until a
// Done frees room or its context ends.
func TestPaceBoundsInFlight(t *testing.T) {
	p := newPace(0, 2, nil, time.Now)
	for range 2 {
		if err := p.Acquire(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := p.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third in a window of 2: %v", err)
	}
	got := make(chan error)
	go func() { got <- p.Acquire(t.Context(), 1) }()
	select {
	case err := <-got:
		t.Fatalf("admitted before a Done: %v", err)
	case <-time.After(10 * time.Millisecond):
	}
	p.Done()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestPacePipelineFirst: pipeline signs take their tokens from the rate
// without waiting, and the re-signatures get what is left: at 20 per
// second, after pipeline signs took 3 signatures, a re-signature waits for
// the bucket to refill. Without a rate, Pipeline does nothing.
func TestPacePipelineFirst(t *testing.T) {
	tests := []struct {
		name      string
		rate      float64
		pipeline  []int   // signatures of each pipeline sign
		wantAtt   float64 // tokens left after the pipeline signs
		wantReady time.Duration
	}{
		{"the burst left", 40, []int{1}, 1, 0},
		{"pipeline signs first", 20, []int{1, 1, 1}, -2, 150 * time.Millisecond},
		{"at most a burst per sign", 20, []int{5}, 0, 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			p := newPace(tt.rate, 4, nil, func() time.Time { return now })
			for _, n := range tt.pipeline {
				p.Pipeline(n)
			}
			if got := p.limit.TokensAt(now); got != tt.wantAtt {
				t.Fatalf("tokens %v after the pipeline signs, want %v", got, tt.wantAtt)
			}
			r := p.limit.ReserveN(now, 1)
			if d := r.DelayFrom(now); d != tt.wantReady {
				t.Fatalf("a re-signature waits %v, want %v", d, tt.wantReady)
			}
		})
	}
	var none *Pace
	none.Pipeline(1)
	newPace(0, 1, nil, time.Now).Pipeline(1)
}

// TestPacePipelineDebt: pipeline signs faster than the rate take its
// tokens ahead by at most pipelineDebt, so a re-signature after them waits
// no longer than that (not as long as the pipelines signed).
func TestPacePipelineDebt(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	p := newPace(10, 4, nil, func() time.Time { return now })
	for range 1000 { // 100 s of the rate, taken at once
		p.Pipeline(1)
	}
	r := p.limit.ReserveN(now, 1)
	defer r.CancelAt(now)
	if d := r.DelayFrom(now); d > pipelineDebt+time.Second/10 {
		t.Fatalf("a re-signature after 1000 pipeline signs at 10/s waits %s, want at most %s", d, pipelineDebt)
	}
}
