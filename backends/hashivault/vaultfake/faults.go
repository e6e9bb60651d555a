package vaultfake

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// faults holds the current Options and the call counts.
type faults struct {
	mu    sync.Mutex
	opts  Options
	calls map[string]int
}

// countdown is the fault a call drew from Options' counters.
type countdown int

const (
	noCountdown countdown = iota
	sealedCall
	internalCall
)

// take counts a call to op and returns the options that apply to it and,
// when the call is faultable, the counted-down fault it uses up: the
// Unavailable ones first, as a sealed Vault answers nothing else.
func (f *faults) take(op string, auth bool) (Options, bool, countdown) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	o := f.opts
	faultable := !auth || o.AuthFaults
	switch {
	case !faultable:
		return o, false, noCountdown
	case f.opts.Unavailable > 0:
		f.opts.Unavailable--
		return o, true, sealedCall
	case f.opts.InternalErrors > 0:
		f.opts.InternalErrors--
		return o, true, internalCall
	}
	return o, true, noCountdown
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

func (f *faults) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// inject waits out the latency, then answers the call's fault if it has
// one: w has been written when it returns true. The faults come after the
// latency: a refused call costs the client a round trip too. closing ends
// the wait when the server closes, so Close does not wait for it.
func inject(ctx context.Context, closing <-chan struct{}, w http.ResponseWriter, o Options, cd countdown, path string) bool {
	if o.Latency > 0 {
		t := time.NewTimer(o.Latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return true // the client is gone; nobody reads an answer
		case <-closing:
			t.Stop()
			writeReply(w, errorReply(http.StatusServiceUnavailable, "vaultfake: server closing"), "")
			return true
		case <-t.C:
		}
	}
	switch {
	case cd == sealedCall:
		writeReply(w, errorReply(http.StatusServiceUnavailable, "Vault is sealed"), "")
	case cd == internalCall:
		writeReply(w, errorReply(http.StatusInternalServerError, "vaultfake: injected internal error"), "")
	case o.ThrottleRate > 0 && rand.Float64() < o.ThrottleRate:
		// Vault's rate limit quotas answer so, with the seconds to wait.
		w.Header().Set("Retry-After", strconv.Itoa(1))
		writeReply(w, errorReply(http.StatusTooManyRequests, "request path "+strconv.Quote(path)+": rate limit quota exceeded"), "")
	default:
		return false
	}
	return true
}
