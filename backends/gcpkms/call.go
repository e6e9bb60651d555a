package gcpkms

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// unboundedCallLimit bounds the retries of an operation whose context has
// no deadline (crypto.Signer.Sign, a CLI without a timeout): an outage must
// end in an error, not a hang.
const unboundedCallLimit = 30 * time.Second

// op describes one operation for call.
type op struct {
	what string // "sign", "get public key", ... for errors and logs
	name string // the resource
	// limiter, when set, paces every attempt (the per-key-version rate).
	limiter *rate.Limiter
	// once marks operations that must not be repeated once they may have
	// taken effect (CreateCryptoKeyVersion would make a second version):
	// they are retried only on RESOURCE_EXHAUSTED and UNAVAILABLE, which
	// Cloud KMS answers before doing anything.
	once bool
}

// call runs attempt until it succeeds, fails for good, or the context's
// deadline leaves no room for another try. It owns all retrying: the client
// library's own retries are switched off (New), so every attempt is counted,
// paced by the rate limit and bounded by the deadline here.
//
// Each attempt gets at most Config.AttemptTimeout. Throttling
// (RESOURCE_EXHAUSTED), UNAVAILABLE and DEADLINE_EXCEEDED of an attempt are
// retried after a backoff (see backoff.go), unless the wait would pass the
// deadline: then call gives up at once with an *UnavailableError rather than
// sleep into a failure. A response failing its integrity checks is retried
// once when it may have been damaged in transit. Other errors are returned
// as they are, typed where callers branch (not found, wrong state).
func (b *Backend) call(ctx context.Context, o op, attempt func(ctx context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, unboundedCallLimit)
		defer cancel()
	}
	var (
		last            error
		integrityRetry  bool
		attempts, retry int
	)
	for ; ; retry++ {
		if b.closed.Load() {
			b.stats.failures.Add(1)
			return &UnavailableError{Op: o.what, Name: o.name, Attempts: attempts, Err: ErrClosed}
		}
		if o.limiter != nil {
			if err := o.limiter.Wait(ctx); err != nil {
				// The limiter refuses at once when the wait would pass the
				// deadline: our own pacing, like throttling, means "later".
				return b.giveUp(ctx, o, attempts, last, fmt.Errorf("client-side rate limit of %v/s per key version: %w", o.limiter.Limit(), err))
			}
		}
		actx, cancel := context.WithTimeout(ctx, b.cfg.AttemptTimeout)
		start := time.Now()
		err := attempt(actx)
		cancel()
		attempts++
		code := status.Code(err)
		b.stats.attempt(time.Since(start), retry > 0, code == codes.ResourceExhausted)
		if err == nil {
			if retry > 0 {
				b.log.Debug("gcpkms: succeeded after retries", "op", o.what, "key", o.name, "attempts", attempts)
			}
			return nil
		}
		last = err

		var ie *IntegrityError
		switch {
		case errors.As(err, &ie):
			if !ie.retry || integrityRetry {
				b.stats.failures.Add(1)
				b.log.Warn("gcpkms: response failed its integrity check", "op", o.what, "key", o.name, "field", ie.Field, "err", err)
				return err
			}
			integrityRetry = true
		case !retryable(code, o.once):
			if ctx.Err() != nil && (code == codes.DeadlineExceeded || code == codes.Canceled) {
				return b.giveUp(ctx, o, attempts, err, nil)
			}
			b.stats.failures.Add(1)
			return b.permanent(o, err)
		}
		if ctx.Err() != nil {
			return b.giveUp(ctx, o, attempts, last, nil)
		}

		wait := b.backoff.wait(retry)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			return b.giveUp(ctx, o, attempts, last, fmt.Errorf("the next retry, in %v, would pass the deadline", wait.Round(time.Millisecond)))
		}
		b.log.Debug("gcpkms: retrying", "op", o.what, "key", o.name, "code", code.String(), "attempt", attempts, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return b.giveUp(ctx, o, attempts, last, nil)
		case <-t.C:
		}
	}
}

// retryable reports whether an attempt that failed with code is worth
// repeating. DEADLINE_EXCEEDED is not, for an operation that must not run
// twice: the first attempt may have taken effect.
func retryable(code codes.Code, once bool) bool {
	switch code {
	case codes.ResourceExhausted, codes.Unavailable:
		return true
	case codes.DeadlineExceeded:
		return !once
	}
	return false
}

// giveUp ends an operation that ran out of time or was cancelled while
// Cloud KMS was throttling or failing. A cancelled context is the caller's
// decision, not an outage, and is not reported as unavailability.
func (b *Backend) giveUp(ctx context.Context, o op, attempts int, last, why error) error {
	b.stats.failures.Add(1)
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("gcpkms: %s %s: %w", o.what, o.name, ctx.Err())
	}
	var errs []error
	if last != nil {
		errs = append(errs, last)
	}
	if why != nil {
		errs = append(errs, why)
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	err := &UnavailableError{Op: o.what, Name: o.name, Attempts: attempts, Err: joinErrs(errs)}
	b.log.Warn("gcpkms: giving up", "op", o.what, "key", o.name, "attempts", attempts, "err", err.Err)
	return err
}

// permanent types a final, non-retryable error.
func (b *Backend) permanent(o op, err error) error {
	switch status.Code(err) {
	case codes.NotFound:
		return &KeyNotFoundError{Name: o.name, Err: err}
	case codes.FailedPrecondition:
		return &KeyStateError{Name: o.name, Err: err}
	}
	var (
		ks *KeyStateError
		nf *KeyNotFoundError
		ua *UnsupportedAlgorithmError
	)
	if errors.As(err, &ks) || errors.As(err, &nf) || errors.As(err, &ua) {
		return err
	}
	return fmt.Errorf("gcpkms: %s %s: %w", o.what, o.name, err)
}

// joinErrs chains errs into one error on one line ("a; b"), each still
// reachable with errors.Is and errors.As.
func joinErrs(errs []error) error {
	switch len(errs) {
	case 0:
		return errors.New("no error recorded")
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w; %w", errs[0], joinErrs(errs[1:]))
}
