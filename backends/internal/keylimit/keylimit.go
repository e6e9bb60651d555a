// Package keylimit hands out one client-side rate limiter per key, so that
// every signer of a key shares its rate (a key opened twice still gets the
// configured rate in total) and one busy key does not slow the others.
package keylimit

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxBurst bounds the burst, whatever the rate: a float rate of 1e300 would
// otherwise overflow the int conversion. (The burst is computed as
// rate·window/second rather than rate·window.Seconds(), so that 30/s over
// 100ms is 3, not the 4 that 30·0.1 rounds up to.)
const maxBurst = 1 << 20

// Map is the limiters of a backend's keys. It is safe for concurrent use.
type Map struct {
	perSecond float64
	burst     int

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// New returns a Map whose limiters admit perSecond requests per key (+Inf:
// no limit), with a burst of burstWindow's worth of requests (at least 1):
// enough for a few cards arriving together after an idle spell. The window
// is the backend's choice, after how its provider meters quotas.
func New(perSecond float64, burstWindow time.Duration) *Map {
	burst := 1
	if !math.IsInf(perSecond, 1) {
		burst = int(min(max(1, math.Ceil(perSecond*float64(burstWindow)/float64(time.Second))), maxBurst))
	}
	return &Map{perSecond: perSecond, burst: burst, limiters: map[string]*rate.Limiter{}}
}

// For returns the limiter of key, making it on first use.
func (m *Map) For(key string) *rate.Limiter {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.limiters[key]
	if !ok {
		limit := rate.Inf
		if !math.IsInf(m.perSecond, 1) {
			limit = rate.Limit(m.perSecond)
		}
		l = rate.NewLimiter(limit, m.burst)
		m.limiters[key] = l
	}
	return l
}
