// Package ratelimit gives each key its own token bucket: each caller, so
// that one busy or hostile caller cannot use up the signing capacity of the
// others (Allow, which refuses), and each KMS key a backend signs with, so
// that every signer of a key shares its rate and one busy key does not slow
// the others (Wait, which paces).
//
// Buckets are golang.org/x/time/rate limiters kept in a map by key (the
// caller identity). The map must not grow without bound when an attacker
// presents endless distinct identities (client certificates are cheap), so
// two things limit it:
//
//   - A bucket left idle long enough to have refilled completely
//     (burst/rate seconds) is indistinguishable from a new one, so it is
//     dropped. Dropping is done by sweeps during Allow, at most once a
//     second per shard of the map or when a shard has doubled since its last
//     sweep, so the cost is amortised over calls.
//   - At most MaxKeys keys are tracked. Past that, new keys share one
//     overflow bucket (with the same rate and burst) until sweeps make room:
//     callers already tracked keep their own buckets, while new callers
//     during a key flood are limited together, and the flood with them.
package ratelimit

import (
	"context"
	"errors"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// MaxKeys is the most keys a Limiter tracks at once.
const MaxKeys = 100_000

// maxBurst bounds the burst BurstFor computes, whatever the rate: a float
// rate of 1e300 would otherwise overflow the int conversion.
const maxBurst = 1 << 20

// ErrWouldExceedDeadline is Wait's answer when the token would come after
// the context's deadline: Wait refuses at once rather than sleep into a
// failure.
var ErrWouldExceedDeadline = errors.New("ratelimit: wait would exceed the context deadline")

const (
	// shardCount spreads keys over separately locked maps so that callers
	// on different keys rarely wait for each other.
	shardCount = 32
	// sweepInterval is the least time between two time-triggered sweeps of
	// a shard.
	sweepInterval = time.Second
	// minSweepLen keeps small shards from sweeping on every insertion
	// through the doubling trigger.
	minSweepLen = 64
)

// Limiter hands out tokens per key. It is safe for concurrent use.
type Limiter struct {
	limit    rate.Limit
	burst    int
	refill   time.Duration // how long an empty bucket takes to fill
	perShard int           // the key cap of each shard
	seed     maphash.Seed
	overflow *bucket // shared by new keys while their shard is full
	now      func() time.Time
	shards   []shard // nil when unlimited
}

type shard struct {
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
	sweptLen  int // len(buckets) after the last sweep
	// Keep neighbouring shards' locks off one cache line.
	_ [64]byte
}

type bucket struct {
	lim      *rate.Limiter
	lastUsed time.Time // guarded by the shard's mu
}

// New returns a limiter giving each key its own token bucket of rate tokens
// per second and burst capacity. rate <= 0 (or +Inf) means unlimited: Allow
// always returns true and no key is tracked. A burst below 1 is taken as 1,
// since a bucket that can hold no token would refuse every call for ever.
// New panics if rate is NaN, which no configuration should produce.
func New(rate float64, burst int) *Limiter {
	return newLimiter(rate, burst, MaxKeys, time.Now)
}

func newLimiter(r float64, burst, maxKeys int, now func() time.Time) *Limiter {
	if math.IsNaN(r) {
		panic("ratelimit: rate is NaN")
	}
	l := &Limiter{now: now}
	if r <= 0 || math.IsInf(r, 1) {
		return l
	}
	burst = max(burst, 1)
	l.limit = rate.Limit(r)
	l.burst = burst
	l.refill = durationOf(float64(burst), r)
	l.perShard = max(1, (maxKeys+shardCount-1)/shardCount)
	l.seed = maphash.MakeSeed()
	l.overflow = &bucket{lim: rate.NewLimiter(l.limit, burst)}
	l.shards = make([]shard, shardCount)
	for i := range l.shards {
		l.shards[i].buckets = make(map[string]*bucket)
	}
	return l
}

// BurstFor returns the burst that holds window's worth of tokens at rate
// per second: at least 1, at most 2^20, 1 for an unlimited rate. It is
// computed as rate·window/second rather than rate·window.Seconds(), so that
// 30/s over 100ms is 3, not the 4 that 30·0.1 rounds up to.
func BurstFor(rate float64, window time.Duration) int {
	if math.IsInf(rate, 1) {
		return 1
	}
	return int(min(max(1, math.Ceil(rate*float64(window)/float64(time.Second))), maxBurst))
}

// Allow takes one token for key. When the bucket is empty it returns false
// and how long until a token is available (the retry delay to report to the
// caller), which is always positive.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l.shards == nil {
		return true, 0
	}
	s := l.shardOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Reading the clock under the lock gives each bucket its calls in clock
	// order: rate.Limiter credits a call that arrives with an earlier time
	// than the last one with time it has already credited.
	now := l.now()
	lim := l.bucket(s, key, now).lim
	if lim.AllowN(now, 1) {
		return true, 0
	}
	d := durationOf(1-lim.TokensAt(now), float64(l.limit))
	return false, max(d, time.Nanosecond)
}

// Wait takes one token for key, waiting until it is available. It returns
// the context's error if ctx ends first, and ErrWouldExceedDeadline at once
// when the token would come after ctx's deadline. A waiting call keeps its
// key's bucket from being swept until its token's time, so that waiters
// queued on a bucket are never joined by a fresh, full one.
func (l *Limiter) Wait(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.shards == nil {
		return nil
	}
	s := l.shardOf(key)
	s.mu.Lock()
	now := l.now()
	b := l.bucket(s, key, now)
	r := b.lim.ReserveN(now, 1) // always OK: the burst is at least 1
	delay := r.DelayFrom(now)
	if deadline, ok := ctx.Deadline(); ok && now.Add(delay).After(deadline) {
		r.CancelAt(now)
		s.mu.Unlock()
		return ErrWouldExceedDeadline
	}
	if until := now.Add(delay); b != l.overflow && until.After(b.lastUsed) {
		b.lastUsed = until
	}
	s.mu.Unlock()
	if delay == 0 {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.Cancel() // give the token back to the callers behind
		return ctx.Err()
	}
}

// Limit is the rate of every key's bucket in tokens per second (rate.Inf
// when unlimited).
func (l *Limiter) Limit() rate.Limit {
	if l.shards == nil {
		return rate.Inf
	}
	return l.limit
}

// Key is one key's share of a Limiter, for a client that makes every call
// of its key through it (a backend's signer of one KMS key).
type Key struct {
	l   *Limiter
	key string
}

// Key returns key's share of l.
func (l *Limiter) Key(key string) Key { return Key{l: l, key: key} }

// Wait takes one token for the key (Limiter.Wait).
func (k Key) Wait(ctx context.Context) error { return k.l.Wait(ctx, k.key) }

// Limit is the key's rate (Limiter.Limit).
func (k Key) Limit() rate.Limit { return k.l.Limit() }

func (l *Limiter) shardOf(key string) *shard {
	return &l.shards[maphash.String(l.seed, key)%shardCount]
}

// bucket returns the bucket of key in shard s, creating it when needed,
// after sweeping s when a sweep is due. s.mu must be held.
func (l *Limiter) bucket(s *shard, key string, now time.Time) *bucket {
	if now.Sub(s.lastSweep) >= sweepInterval || len(s.buckets) >= 2*max(s.sweptLen, minSweepLen) {
		s.sweep(now, l.refill)
	}
	if b, ok := s.buckets[key]; ok {
		if now.After(b.lastUsed) {
			b.lastUsed = now
		}
		return b
	}
	if len(s.buckets) >= l.perShard {
		return l.overflow
	}
	b := &bucket{lim: rate.NewLimiter(l.limit, l.burst), lastUsed: now}
	s.buckets[key] = b
	return b
}

// sweep drops the buckets idle for at least refill: each has refilled
// completely, so a fresh bucket made on the key's next call behaves the
// same. A bucket drained to empty is never dropped before that, so
// eviction cannot hand a caller extra tokens.
func (s *shard) sweep(now time.Time, refill time.Duration) {
	for k, b := range s.buckets {
		if now.Sub(b.lastUsed) >= refill {
			delete(s.buckets, k)
		}
	}
	s.lastSweep = now
	s.sweptLen = len(s.buckets)
}

// Len reports how many keys are tracked (for tests and metrics). Keys
// sharing the overflow bucket are not counted.
func (l *Limiter) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.buckets)
		s.mu.Unlock()
	}
	return n
}

// durationOf returns how long rate tokens per second take to make tokens
// tokens, rounded up so that a caller who waits that long finds them, and
// capped rather than overflowing for tiny rates.
func durationOf(tokens, rate float64) time.Duration {
	ns := math.Ceil(tokens / rate * float64(time.Second))
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}
