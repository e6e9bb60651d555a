//go:build !nogcpkms

package gcpkms

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	exact := (&Backend{}).retryPolicy().Backoff
	exact.Jitter = func(d time.Duration) time.Duration { return d }
	tests := []struct {
		retry int
		want  time.Duration
	}{
		{0, 50 * time.Millisecond},
		{1, 100 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, 1600 * time.Millisecond},
		{6, 2 * time.Second},
		{40, 2 * time.Second},
		{1000, 2 * time.Second},
	}
	for _, tt := range tests {
		// Retry n (0-based) follows the (n+1)-th failed attempt.
		if got := exact.Pause(tt.retry + 1); got != tt.want {
			t.Errorf("wait(%d) = %v, want %v", tt.retry, got, tt.want)
		}
	}
	// Full jitter: uniform over [0, cap], so waits below half the cap are common.
	b := (&Backend{}).retryPolicy().Backoff
	low := 0
	for range 1000 {
		w := b.Pause(4)
		if w < 0 || w > 400*time.Millisecond {
			t.Fatalf("wait(3) = %v, want within [0, 400ms]", w)
		}
		if w < 200*time.Millisecond {
			low++
		}
	}
	if low < 350 || low > 650 {
		t.Errorf("%d of 1000 waits below half the cap: not uniform", low)
	}
}
