// Package retry is the one retry loop of the KMS backends. They switch
// their client libraries' retries off (Cloud KMS's client never retries
// RESOURCE_EXHAUSTED; the AWS SDK's retryer would hide attempts and pauses
// from the per-key rate limit and the metrics), so that this loop sees
// every attempt:
// it paces each with the key's rate limiter, counts it for the metrics,
// backs off with full jitter, and gives up as soon as the next pause would
// pass the deadline instead of sleeping into a failure. What is worth
// retrying is the backend's to say, through a Classifier.
package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	"github.com/cardsign/cardsign/backends/internal/kmsstats"
)

// Class is how the loop handles an attempt's error.
type Class int

const (
	// Final is a refusal (not found, wrong state, bad request): retrying
	// cannot help, and the error is returned as it is.
	Final Class = iota
	// Transient is a failure of the provider or the network: a retry may
	// succeed.
	Transient
	// Throttled is the provider asking us to slow down: retried like
	// Transient, and counted as throttling.
	Throttled
	// NotRepeated is a transient failure of an operation that may have taken
	// effect (creating a key after a 5xx): repeating it could do it twice,
	// so the call gives up and reports the provider unavailable.
	NotRepeated
	// Interrupted is an attempt that ended because the call's own context
	// did (its deadline passed, or the caller cancelled): the call ends too.
	Interrupted
)

// Classifier sorts an attempt's error. ctx is the call's context, so that a
// classifier can tell a timeout caused by its end (Interrupted) from one
// inside the client or of the attempt alone (Transient, or Final for an
// operation that must not run twice). A classifier may keep state for the
// duration of one call (retry a damaged response once): make one per call.
type Classifier func(ctx context.Context, err error) Class

// Backoff is a full-jitter exponential schedule: the pause after the n-th
// failed attempt is uniform in (0, min(Cap, Base·2ⁿ⁻¹)], as AWS recommends
// for throttling, so that many callers throttled at once spread out instead
// of retrying in lock-step. The cap is low because callers wait on a
// signature; the deadline, not a retry count, ends the retries.
type Backoff struct {
	Base, Cap time.Duration
	// Jitter returns a duration in (0, ceiling]; nil means FullJitter.
	// Tests replace it to make pauses predictable.
	Jitter func(ceiling time.Duration) time.Duration
}

// FullJitter returns a uniform duration in (0, ceiling] (ceiling > 0).
func FullJitter(ceiling time.Duration) time.Duration { return rand.N(ceiling) + 1 }

// Pause returns the pause after the failed-th failed attempt (1-based).
func (b Backoff) Pause(failed int) time.Duration {
	ceiling := b.Cap
	if failed >= 1 && failed <= 30 { // beyond that the shift overflows; the cap applies long before
		ceiling = min(b.Cap, b.Base<<(failed-1))
	}
	jitter := b.Jitter
	if jitter == nil {
		jitter = FullJitter
	}
	return jitter(ceiling)
}

// Policy is a backend's retry settings, shared by all its calls.
type Policy struct {
	Name    string       // the backend, prefixing log messages: "awskms"
	Log     *slog.Logger // required
	Stats   *kmsstats.Counters
	Backoff Backoff
	// Window bounds a call whose context has no deadline (crypto.Signer's
	// Sign, a CLI without a timeout): an outage must end in an error, not a
	// hang. It bounds the attempts and rate-limit waits too.
	Window time.Duration
	// AttemptTimeout bounds each attempt; 0 leaves that to the context.
	AttemptTimeout time.Duration
	// Closed, if set, is checked before every attempt: once it is true,
	// the call ends as a *GaveUpError whose reason is ErrClosed (a backend
	// closed while its calls were retrying).
	Closed    *atomic.Bool
	ErrClosed error
	// Describe names an error briefly for logs (an error code); nil logs
	// the error's text.
	Describe func(error) string
	// RetryAfter, if set, returns how long the provider asked to wait
	// before the next attempt (an HTTP Retry-After), 0 when it did not say:
	// the pause is then at least that long, and a call whose deadline
	// comes first gives up at once.
	RetryAfter func(error) time.Duration
}

// Pacer paces the attempts on one key: a *rate.Limiter, or the key's share
// of a ratelimit.Limiter. Wait takes a token, refusing at once when it would
// come after the context's deadline; Limit is the rate, for the error.
type Pacer interface {
	Wait(ctx context.Context) error
	Limit() rate.Limit
}

// Call is one operation for Do.
type Call struct {
	Op       string // the operation, for errors and logs: "Sign", "get key version"
	Key      string // the key (or alias, or key spec), for errors and logs
	Limiter  Pacer  // the key's rate limiter; nil for none
	Classify Classifier
}

// GaveUpError reports a call that ended without an answer it could use:
// the provider kept throttling or failing until the deadline (or the next
// pause would have passed it), the rate limiter could not admit the
// attempt in time, an operation could not be repeated safely, or the
// backend was closed. Each backend turns it into its own UnavailableError, which
// matches backends.ErrUnavailable.
type GaveUpError struct {
	Attempts int
	Last     error // the last attempt's error; nil when none was made or recorded
	Reason   error // why the loop stopped; wraps context.DeadlineExceeded when time ran out
}

func (e *GaveUpError) Error() string {
	msg := fmt.Sprintf("gave up after %d attempt(s): %v", e.Attempts, e.Reason)
	if e.Last != nil {
		msg += "; last error: " + e.Last.Error()
	}
	return msg
}

// Unwrap returns the last error and the reason, each reachable with
// errors.Is and errors.As.
func (e *GaveUpError) Unwrap() []error { return Causes(e.Last, e.Reason) }

// Causes is what the Unwrap of an error that gave up returns: the last
// attempt's error and the reason for stopping, leaving out a nil one.
func Causes(last, reason error) []error {
	var errs []error
	for _, err := range []error{last, reason} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Do runs attempt, one request per call, until it succeeds, fails for good,
// or the deadline leaves no room for another attempt. Every attempt first
// waits for c.Limiter. It returns nil; a Final error as it is; the
// context's error when the caller cancelled (not the provider's doing, so
// not unavailability); or a *GaveUpError. Every failure is counted once.
func (p *Policy) Do(ctx context.Context, c Call, attempt func(context.Context) error) error {
	_, hasDeadline := ctx.Deadline()
	if !hasDeadline && p.Window > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Window)
		defer cancel()
	}
	own := !hasDeadline // the deadline is the window's, not the caller's
	var last error
	for n := 1; ; n++ {
		if p.Closed != nil && p.Closed.Load() {
			return p.gaveUp(c, n-1, last, p.ErrClosed)
		}
		if c.Limiter != nil {
			if err := c.Limiter.Wait(ctx); err != nil {
				if ctx.Err() != nil {
					return p.ended(ctx, c, n-1, last, own)
				}
				// Wait refuses at once when the wait would outlast the
				// deadline: our own pacing, like throttling, means "later".
				return p.gaveUp(c, n-1, last, fmt.Errorf("client-side rate limit of %g/s per key: %w",
					float64(c.Limiter.Limit()), context.DeadlineExceeded))
			}
		}
		took, err := p.attempt(ctx, attempt)
		if err == nil {
			p.Stats.Attempt(took, n > 1, false)
			if n > 1 {
				p.Log.Debug(p.Name+": succeeded after retries", "op", c.Op, "key", c.Key, "attempts", n)
			}
			return nil
		}
		class := c.Classify(ctx, err) // once per attempt: classifiers may keep state
		p.Stats.Attempt(took, n > 1, class == Throttled)
		if class == Interrupted && ctx.Err() == nil {
			class = Transient // a timeout inside the client: the network's doing
		}
		if class == Final {
			p.Stats.Failure()
			return err
		}
		if class != Interrupted {
			last = err
		}
		if ctx.Err() != nil {
			return p.ended(ctx, c, n, last, own)
		}
		if class == NotRepeated {
			return p.gaveUp(c, n, last, fmt.Errorf("%s is not retried after a transient error: it may have taken effect", c.Op))
		}
		pause := p.Backoff.Pause(n)
		if p.RetryAfter != nil {
			pause = max(pause, p.RetryAfter(err))
		}
		if dl, _ := ctx.Deadline(); time.Until(dl) <= pause {
			return p.gaveUp(c, n, last, fmt.Errorf("the next attempt, in %v, would start past the deadline: %w",
				pause.Round(time.Millisecond), p.deadline(own)))
		}
		p.Log.Debug(p.Name+": retrying", "op", c.Op, "key", c.Key, "attempt", n, "pause", pause, "error", p.describe(err))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return p.ended(ctx, c, n, last, own)
		case <-t.C:
		}
	}
}

// attempt makes one attempt, bounded by AttemptTimeout, and returns its
// error and how long the provider took.
func (p *Policy) attempt(ctx context.Context, attempt func(context.Context) error) (time.Duration, error) {
	if p.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.AttemptTimeout)
		defer cancel()
	}
	start := time.Now()
	err := attempt(ctx)
	return time.Since(start), err
}

// ended ends a call whose context ended: a cancellation is the caller's
// decision and is returned as it is, a deadline is unavailability.
func (p *Policy) ended(ctx context.Context, c Call, attempts int, last error, own bool) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		p.Stats.Failure()
		return ctx.Err()
	}
	return p.gaveUp(c, attempts, last, p.deadline(own))
}

// deadline is the reason of a call that ran out of time.
func (p *Policy) deadline(own bool) error {
	if own {
		return fmt.Errorf("gave up after the %v retry window: %w", p.Window, context.DeadlineExceeded)
	}
	return context.DeadlineExceeded
}

func (p *Policy) gaveUp(c Call, attempts int, last, reason error) error {
	p.Stats.Failure()
	p.Log.Warn(p.Name+": provider unavailable, giving up", "op", c.Op, "key", c.Key, "attempts", attempts,
		"reason", reason, "last_error", p.describe(last))
	return &GaveUpError{Attempts: attempts, Last: last, Reason: reason}
}

func (p *Policy) describe(err error) string {
	switch {
	case err == nil:
		return ""
	case p.Describe != nil:
		return p.Describe(err)
	}
	return err.Error()
}

// Network reports whether err is the network's: a refused, reset or
// timed-out connection, a response cut short. A backend's classifier
// retries these; anything else that is not the provider's answer (a
// client that cannot build the request, a challenge it cannot read) does
// not get better by itself.
func Network(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

// OneLine chains the non-nil errs into one error on one line ("a; b"),
// each still reachable with errors.Is and errors.As: how a backend's
// UnavailableError carries a GaveUpError's last error and reason.
func OneLine(errs ...error) error {
	var kept []error
	for _, err := range errs {
		if err != nil {
			kept = append(kept, err)
		}
	}
	switch len(kept) {
	case 0:
		return errors.New("no error recorded")
	case 1:
		return kept[0]
	}
	return fmt.Errorf("%w; %w", kept[0], OneLine(kept[1:]...))
}
