package gcpkms

import (
	"math/rand/v2"
	"time"
)

// Retry pacing: exponential backoff with full jitter (the wait before retry
// n is uniform in [0, min(maxBackoff, minBackoff·2ⁿ)]), which spreads the
// retries of many callers throttled at once instead of bringing them back
// together. The cap is low because callers wait on a signature; the
// caller's deadline, not a retry count, ends the retries.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// backoff is a retry schedule. jitter returns a uniform duration in [0, d];
// tests replace it to make waits predictable.
type backoff struct {
	min, max time.Duration
	jitter   func(d time.Duration) time.Duration
}

func defaultBackoff() backoff {
	return backoff{min: minBackoff, max: maxBackoff, jitter: fullJitter}
}

func fullJitter(d time.Duration) time.Duration { return rand.N(d + 1) }

// wait is the pause before retry n (0 for the first retry).
func (b backoff) wait(n int) time.Duration {
	d := b.max
	if n < 30 { // beyond that the shift overflows; the cap applies long before
		d = min(b.max, b.min<<n)
	}
	return b.jitter(d)
}
