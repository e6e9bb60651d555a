package awskms

import (
	"math"

	"golang.org/x/time/rate"
)

// limiterFor returns the rate limiter of a key, shared by every signer of
// that key (a key opened twice still gets RateLimit in total). Keyed by key
// ARN, which Open resolved aliases and key IDs to.
func (b *Backend) limiterFor(keyARN string) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.limiters[keyARN]
	if !ok {
		l = newLimiter(b.cfg.RateLimit)
		b.limiters[keyARN] = l
	}
	return l
}

// newLimiter returns a token bucket of perSecond with a burst of a tenth of
// a second's worth (at least 1): enough for a few cards arriving together,
// too little to overrun a KMS quota set at the same rate.
func newLimiter(perSecond float64) *rate.Limiter {
	if math.IsInf(perSecond, 1) {
		return rate.NewLimiter(rate.Inf, 1)
	}
	burst := int(min(max(1, math.Ceil(perSecond/10)), 1<<20))
	return rate.NewLimiter(rate.Limit(perSecond), burst)
}
