package azurekvfake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// DefaultTokenTTL is the lifetime of issued tokens when Options.TokenTTL is
// zero, as for real managed-identity tokens (they last an hour or more).
const DefaultTokenTTL = time.Hour

// Options are the faults the server injects into the data plane, and the
// lifetime of the tokens it issues. They can be changed while it runs
// (Server.Update). The token endpoint is never faulted.
type Options struct {
	// Latency is added before every data-plane answer, challenges
	// included, as a round trip to a vault would be.
	Latency time.Duration
	// ThrottleRate is the share of calls (0..1) answered 429 Throttled
	// with a Retry-After header, as Key Vault does past its limits.
	ThrottleRate float64
	// Unavailable makes the next N calls fail with 503.
	Unavailable int
	// InternalErrors makes the next N calls fail with 500, after the
	// Unavailable ones.
	InternalErrors int
	// RetryAfter is the Retry-After header of throttled answers, "1" when
	// empty. It is sent as is, so a test can send a malformed one too.
	RetryAfter string
	// TokenTTL is the lifetime of the tokens issued from now on;
	// DefaultTokenTTL when zero. A client renews its token once it has
	// expired, and tries to 5 minutes before, at most every 30 seconds
	// (azcore), while MSAL's cache serves no token that close to expiry:
	// below 5 minutes, a busy client gets a new token every 30 seconds or
	// at expiry, whichever comes first.
	TokenTTL time.Duration
}

func (o Options) validate() error {
	switch {
	case o.Latency < 0:
		return fmt.Errorf("azurekvfake: negative latency %v", o.Latency)
	case o.ThrottleRate < 0 || o.ThrottleRate > 1 || o.ThrottleRate != o.ThrottleRate:
		return fmt.Errorf("azurekvfake: throttle rate %v is not in 0..1", o.ThrottleRate)
	case o.Unavailable < 0:
		return fmt.Errorf("azurekvfake: negative unavailable count %d", o.Unavailable)
	case o.InternalErrors < 0:
		return fmt.Errorf("azurekvfake: negative internal error count %d", o.InternalErrors)
	case o.TokenTTL < 0:
		return fmt.Errorf("azurekvfake: negative token TTL %v", o.TokenTTL)
	}
	return nil
}

func (o Options) tokenTTL() time.Duration {
	if o.TokenTTL == 0 {
		return DefaultTokenTTL
	}
	return o.TokenTTL
}

func (o Options) retryAfter() string {
	if o.RetryAfter == "" {
		return "1"
	}
	return o.RetryAfter
}

// fault is the failure injected into one call.
type fault int

const (
	noFault fault = iota
	unavailable
	internalError
	throttled
)

// faults holds the current Options and the call counts.
type faults struct {
	mu    sync.Mutex
	opts  Options
	calls map[string]int
}

// count counts a call to op that is not faulted (tokens, challenges).
func (f *faults) count(op string) Options {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	return f.opts
}

// take counts a call to the data-plane operation op and returns the
// options that apply to it and its fault, using up an Unavailable or
// InternalErrors count if it is one of those.
func (f *faults) take(op string) (Options, fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	o := f.opts
	switch {
	case f.opts.Unavailable > 0:
		f.opts.Unavailable--
		return o, unavailable
	case f.opts.InternalErrors > 0:
		f.opts.InternalErrors--
		return o, internalError
	case o.ThrottleRate > 0 && rand.Float64() < o.ThrottleRate:
		return o, throttled
	}
	return o, noFault
}

func (f *faults) callCount(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *faults) snapshot() Options {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opts
}

func (f *faults) update(change func(*Options)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.opts
	change(&o)
	if err := o.validate(); err != nil {
		return err
	}
	f.opts = o
	return nil
}

// sleep waits out the latency; it is false if the client gave up or the
// server is closing first, and then nothing should be answered.
func sleep(ctx context.Context, done <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-done:
	}
	return false
}
