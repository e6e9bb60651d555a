// Package kmsstats counts the requests a KMS backend makes, for the
// daemon's metrics. Every KMS backend uses the one Stats type, so the
// daemon needs one adapter from it to its metrics.
package kmsstats

import (
	"sync/atomic"
	"time"
)

// Stats are a backend's counters since it was made.
type Stats struct {
	Attempts   uint64 // requests sent to the provider, retries included
	Throttled  uint64 // requests the provider answered with throttling
	Retries    uint64 // requests that were retries of a failed one
	Failures   uint64 // operations that failed for good, after any retries
	Signatures uint64 // signatures returned to callers
	// Latency is per request: the time the provider (and the network) took
	// to answer, not counting rate-limit waits and backoff pauses.
	Latency Latency
}

// Latency summarizes durations.
type Latency struct {
	Count uint64
	Total time.Duration
	Max   time.Duration
}

// Mean returns Total/Count, 0 when there were none.
func (l Latency) Mean() time.Duration {
	if l.Count == 0 {
		return 0
	}
	return l.Total / time.Duration(l.Count)
}

// Counters are the live Stats. They are atomics so that signing never takes
// a lock for them. The zero value is ready to use.
type Counters struct {
	attempts, throttled, retries, failures, signatures atomic.Uint64
	latCount                                           atomic.Uint64
	latTotal, latMax                                   atomic.Int64 // nanoseconds
}

// Attempt records one request that took d; retry tells whether it repeated
// a failed one, throttled whether the provider answered with throttling.
func (c *Counters) Attempt(d time.Duration, retry, throttled bool) {
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

// Failure records an operation that failed for good.
func (c *Counters) Failure() { c.failures.Add(1) }

// Signature records a signature returned to a caller.
func (c *Counters) Signature() { c.signatures.Add(1) }

// Snapshot returns the counters. They are read one by one while requests
// run, so they may be a request apart from each other.
func (c *Counters) Snapshot() Stats {
	return Stats{
		Attempts:   c.attempts.Load(),
		Throttled:  c.throttled.Load(),
		Retries:    c.retries.Load(),
		Failures:   c.failures.Load(),
		Signatures: c.signatures.Load(),
		Latency: Latency{
			Count: c.latCount.Load(),
			Total: time.Duration(c.latTotal.Load()),
			Max:   time.Duration(c.latMax.Load()),
		},
	}
}
