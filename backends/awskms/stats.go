package awskms

import (
	"sync/atomic"
	"time"
)

// Stats are the backend's counters since New, for the daemon's metrics.
// They cover every KMS request the backend makes (Sign, DescribeKey,
// GetPublicKey, CreateKey, alias updates, DisableKey).
type Stats struct {
	Attempts   uint64 // KMS requests sent
	Throttled  uint64 // requests answered with throttling (ThrottlingException, LimitExceededException, 429)
	Retries    uint64 // requests that were retries of a failed one
	Failures   uint64 // operations that failed for good, after any retries
	Signatures uint64 // signatures returned to callers
	// Latency is per request: the time KMS (and the network) took to
	// answer, not counting rate-limit waits and backoff pauses.
	Latency LatencySummary
}

// LatencySummary summarizes durations.
type LatencySummary struct {
	Count uint64
	Total time.Duration
	Max   time.Duration
}

// Mean returns Total/Count, 0 when there were none.
func (l LatencySummary) Mean() time.Duration {
	if l.Count == 0 {
		return 0
	}
	return l.Total / time.Duration(l.Count)
}

// stats holds the counters; they are atomics so that signing never takes a
// lock for them.
type stats struct {
	attempts, throttled, retries, failures, signatures atomic.Uint64
	latCount                                           atomic.Uint64
	latTotal, latMax                                   atomic.Int64 // nanoseconds
}

// observe records one request's latency.
func (s *stats) observe(d time.Duration) {
	s.attempts.Add(1)
	s.latCount.Add(1)
	s.latTotal.Add(int64(d))
	for {
		m := s.latMax.Load()
		if int64(d) <= m || s.latMax.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// Stats returns a snapshot of the counters. Counters are read one by one
// while requests run, so they may be a request apart from each other.
func (b *Backend) Stats() Stats {
	s := &b.stats
	return Stats{
		Attempts:   s.attempts.Load(),
		Throttled:  s.throttled.Load(),
		Retries:    s.retries.Load(),
		Failures:   s.failures.Load(),
		Signatures: s.signatures.Load(),
		Latency: LatencySummary{
			Count: s.latCount.Load(),
			Total: time.Duration(s.latTotal.Load()),
			Max:   time.Duration(s.latMax.Load()),
		},
	}
}
