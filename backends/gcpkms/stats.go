package gcpkms

import (
	"sync/atomic"
	"time"
)

// Stats are the backend's counters since New, for metrics. Every call to
// Cloud KMS (sign, public key, key version reads, create, disable) counts.
type Stats struct {
	Attempts  uint64 // calls sent to Cloud KMS, retries included
	Throttled uint64 // attempts answered RESOURCE_EXHAUSTED
	Retries   uint64 // attempts that were retries of an earlier one
	Failures  uint64 // operations that failed in the end, after any retries
	Latency   Latency
}

// Latency summarizes the duration of attempts (not of operations, which
// add backoff and rate-limit waits).
type Latency struct {
	Count uint64
	Total time.Duration
	Max   time.Duration
}

// Mean is the average attempt latency; 0 before the first.
func (l Latency) Mean() time.Duration {
	if l.Count == 0 {
		return 0
	}
	return l.Total / time.Duration(l.Count)
}

// counters are the live Stats.
type counters struct {
	attempts, throttled, retries, failures atomic.Uint64
	latCount                               atomic.Uint64
	latTotal, latMax                       atomic.Int64 // nanoseconds
}

// attempt records one call to Cloud KMS.
func (c *counters) attempt(d time.Duration, retry, throttled bool) {
	c.attempts.Add(1)
	if retry {
		c.retries.Add(1)
	}
	if throttled {
		c.throttled.Add(1)
	}
	c.latCount.Add(1)
	c.latTotal.Add(int64(d))
	for {
		m := c.latMax.Load()
		if int64(d) <= m || c.latMax.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

func (c *counters) snapshot() Stats {
	return Stats{
		Attempts:  c.attempts.Load(),
		Throttled: c.throttled.Load(),
		Retries:   c.retries.Load(),
		Failures:  c.failures.Load(),
		Latency: Latency{
			Count: c.latCount.Load(),
			Total: time.Duration(c.latTotal.Load()),
			Max:   time.Duration(c.latMax.Load()),
		},
	}
}
