package registry

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultResignConcurrency is how many re-signatures are in flight at most
// when Config.ResignConcurrency is 0: a card holds its place for the whole
// of its signing (the KMS's 20–50 ms, its audit commit, its registry
// write), so at a few hundred cards per second some 30–50 are in flight;
// fewer than the daemon's default slots per backend (64), so that pipeline
// signs always find one.
const DefaultResignConcurrency = 48

// resignCutSpacing is how long after one cut of the window the next
// throttling may cut it again: the requests in flight when the provider
// first answered with throttling were sent at the old pace, and their
// answers are no news.
const resignCutSpacing = 250 * time.Millisecond

// Pace paces the registry's re-signing at the pace of the key backend, which
// the authority's pipeline signs share (a KMS quota counts both):
//
//   - a token bucket of Config.ResignRate signatures per second (none when
//     0), from which pipeline signs take their tokens first, without
//     waiting (Pipeline): re-signing gets what they leave;
//   - a window of re-signatures in flight, additive increase, multiplicative
//     decrease (AIMD): halved when the backend reports throttling (at most
//     once per resignCutSpacing), grown by one after a window's worth of
//     signatures without, up to Config.ResignConcurrency.
//
// A throttled request is not an error: the backend retries it after a
// pause, and the window shrinks so that fewer are sent.
type Pace struct {
	limit   *rate.Limiter // nil: no rate set
	max     int
	throttl func() uint64 // the backends' throttled requests so far; nil: none reported
	now     func() time.Time

	mu       sync.Mutex
	window   int
	inflight int
	ok       int       // signatures since the window last grew or was cut
	seen     uint64    // throttles() when last read
	primed   bool      // seen was read once (not at construction: it opens the signing keys)
	cutAt    time.Time // when the window was last cut
	freed    chan struct{}
}

// newPace returns the pace of rate signatures per second (0: none), at
// most concurrency in flight (0: DefaultResignConcurrency), adapting to
// throttles.
func newPace(perSecond float64, concurrency int, throttles func() uint64, now func() time.Time) *Pace {
	if concurrency <= 0 {
		concurrency = DefaultResignConcurrency
	}
	p := &Pace{max: concurrency, window: concurrency, throttl: throttles, now: now, freed: make(chan struct{})}
	if perSecond > 0 {
		// A burst of a twentieth of a second: the backend's quota
		// admits bursts of its own, and re-signing must not spend them.
		p.limit = rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond/20)))
	}
	return p
}

// Pipeline takes n signatures (one per key) of a pipeline sign from the
// rate, without waiting: pipeline signs go first, and the re-signatures
// waiting for tokens wait longer.
func (p *Pace) Pipeline(n int) {
	if p == nil || p.limit == nil || n <= 0 {
		return
	}
	now := p.now()
	r := p.limit.ReserveN(now, min(n, p.limit.Burst()))
	if r.OK() && r.DelayFrom(now) > pipelineDebt {
		// Pipelines signing faster than the rate would otherwise run up
		// a debt that makes the next re-signing pass (a revocation's)
		// wait for as long as they signed: beyond pipelineDebt their
		// signatures take no more of the rate.
		r.CancelAt(now)
	}
}

// pipelineDebt is how far ahead pipeline signs may take the rate's tokens:
// re-signing waits at most this long for them.
const pipelineDebt = time.Second

// Acquire waits for room in the window and for n signatures' tokens, or
// until ctx ends. Every Acquire that returns nil is followed by one Done.
func (p *Pace) Acquire(ctx context.Context, n int) error {
	p.prime()
	for {
		p.mu.Lock()
		if p.inflight < p.window {
			p.inflight++
			p.mu.Unlock()
			break
		}
		freed := p.freed
		p.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if p.limit == nil || n <= 0 {
		return nil
	}
	if err := p.limit.WaitN(ctx, min(n, p.limit.Burst())); err != nil {
		p.Done()
		return err
	}
	return nil
}

// prime reads the backends' throttle count once, as the base later counts
// are compared with: at the first re-signature, not when the registry is
// made (reading it opens the signing keys).
func (p *Pace) prime() {
	if p.throttl == nil {
		return
	}
	p.mu.Lock()
	primed := p.primed
	p.mu.Unlock()
	if primed {
		return
	}
	t := p.throttl()
	p.mu.Lock()
	if !p.primed {
		p.seen, p.primed = t, true
	}
	p.mu.Unlock()
}

// Done ends a re-signature Acquire admitted, and adapts the window to
// whether the backend throttled meanwhile.
func (p *Pace) Done() {
	var now time.Time
	var throttles uint64
	if p.throttl != nil {
		throttles, now = p.throttl(), p.now()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight--
	switch {
	case throttles < p.seen:
		// The signing keys moved to other backends, whose counts are
		// their own: a new base, not news.
		p.seen = throttles
	case throttles > p.seen:
		p.seen = throttles
		if now.Sub(p.cutAt) >= resignCutSpacing {
			p.window = max(1, p.window/2)
			p.cutAt, p.ok = now, 0
		}
	case p.window < p.max:
		if p.ok++; p.ok >= p.window {
			p.window++
			p.ok = 0
		}
	}
	close(p.freed) // wake the waiters: one of them takes the room
	p.freed = make(chan struct{})
}

// Window returns the re-signatures allowed in flight now.
func (p *Pace) Window() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.window
}
