package awskms

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"golang.org/x/time/rate"
)

// Backoff schedule: full jitter (a uniform pause in [0, min(backoffCap,
// backoffBase·2^(n-1))) after the n-th failed attempt), as AWS recommends
// for throttling, so that many signers throttled at once spread out instead
// of retrying in lock-step.
const (
	backoffBase = 25 * time.Millisecond
	backoffCap  = 2 * time.Second
	// retryWindow bounds the retries of a call whose context has no
	// deadline; with a deadline, the deadline does.
	retryWindow = 30 * time.Second
)

// call describes one KMS operation for do.
type call struct {
	op      string        // the KMS operation, for errors and logs
	key     string        // the key (or alias, or KeySpec), for errors and logs
	limiter *rate.Limiter // per-key rate limit, nil for none
	// idempotent operations are retried after any transient error; the
	// others (CreateKey) only after throttling, which KMS answers without
	// executing the request: a retry after a 5xx might create a second key.
	idempotent bool
}

// errKind is how an attempt's error is handled.
type errKind int

const (
	permanent errKind = iota // a refusal: retrying cannot help
	throttled                // KMS asked us to slow down
	transient                // KMS or the network failed; a retry may succeed
	ctxDone                  // our own context ended
)

// classify sorts an SDK error. With the SDK's retryer off, this list is the
// retry policy: KMS's documented retryable exceptions, any 5xx or 429, and
// failures to send the request or read the response.
func classify(err error) errKind {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ctxDone
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ThrottlingException", "LimitExceededException", "TooManyRequestsException", "RequestLimitExceeded", "Throttling":
			return throttled
		case "KMSInternalException", "DependencyTimeoutException", "KeyUnavailableException",
			"InternalFailure", "InternalServerError", "ServiceUnavailable", "ServiceUnavailableException":
			return transient
		}
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		switch code := status.HTTPStatusCode(); {
		case code == 429:
			return throttled
		case code >= 500:
			return transient
		}
	}
	var send *smithyhttp.RequestSendError
	var netErr net.Error
	if errors.As(err, &send) || errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) {
		return transient
	}
	return permanent
}

// backoff returns the pause after the attempt-th failed attempt (1-based).
func backoff(attempt int) time.Duration {
	ceiling := backoffCap
	if attempt <= 16 {
		ceiling = min(backoffCap, backoffBase<<(attempt-1))
	}
	return rand.N(ceiling) + 1
}

// do runs fn, one KMS request per call, until it succeeds, fails for good,
// or the deadline leaves no room for another attempt. Every attempt first
// waits for c.limiter. It returns nil, fn's error for a permanent failure or
// a cancellation, or an *UnavailableError.
//
// The deadline is the context's, else retryWindow from now. A pause that
// would end past it is not taken: the call fails at once, so that a caller
// with a short deadline hears "unavailable" early instead of at its
// deadline.
func (b *Backend) do(ctx context.Context, c call, fn func(context.Context) error) error {
	deadline, hasDeadline := ctx.Deadline()
	if !hasDeadline {
		deadline = time.Now().Add(retryWindow)
	}
	unavailable := func(attempts int, last, reason error) error {
		b.stats.failures.Add(1)
		b.log.Warn("awskms: KMS unavailable", "op", c.op, "key", c.key, "attempts", attempts,
			"reason", reason, "last_error", errorCode(last))
		return &UnavailableError{Op: c.op, Key: c.key, Attempts: attempts, Err: last, Reason: reason}
	}
	var last error // the last transient error, for the final report
	for attempt := 1; ; attempt++ {
		if c.limiter != nil {
			if err := c.limiter.Wait(ctx); err != nil {
				if errors.Is(ctx.Err(), context.Canceled) {
					b.stats.failures.Add(1)
					return ctx.Err()
				}
				// Wait fails at once when the wait would outlast the deadline.
				return unavailable(attempt-1, last, fmt.Errorf("client-side rate limit of %g/s per key: %w",
					float64(c.limiter.Limit()), context.DeadlineExceeded))
			}
		}
		start := time.Now()
		err := fn(ctx)
		b.stats.observe(time.Since(start))
		if err == nil {
			return nil
		}
		kind := classify(err)
		if kind == ctxDone && ctx.Err() == nil {
			// A context error while ours is live: a timeout inside the SDK
			// or HTTP client, which is the network's doing.
			kind = transient
		}
		if kind == throttled {
			b.stats.throttled.Add(1)
		}
		if kind != ctxDone {
			last = err
		}
		switch {
		case kind == permanent:
			b.stats.failures.Add(1)
			return err
		case ctx.Err() != nil:
			if errors.Is(ctx.Err(), context.Canceled) {
				b.stats.failures.Add(1) // the caller gave up; not KMS's doing
				return err
			}
			return unavailable(attempt, last, ctx.Err())
		case !c.idempotent && kind != throttled:
			return unavailable(attempt, last, fmt.Errorf("%s is not retried after a transient error: it may have taken effect", c.op))
		}

		pause := backoff(attempt)
		if time.Until(deadline) <= pause {
			reason := context.DeadlineExceeded
			if !hasDeadline {
				reason = fmt.Errorf("gave up after the %v retry window", retryWindow)
			}
			return unavailable(attempt, last, fmt.Errorf("the next attempt (in %v) would start past the deadline: %w", pause.Round(time.Millisecond), reason))
		}
		b.log.Debug("awskms: retrying", "op", c.op, "key", c.key, "attempt", attempt, "pause", pause, "error", errorCode(err))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(ctx.Err(), context.Canceled) {
				b.stats.failures.Add(1)
				return ctx.Err()
			}
			return unavailable(attempt, last, ctx.Err())
		case <-t.C:
		}
		b.stats.retries.Add(1)
	}
}

// errorCode is the short name of an error for logs: the KMS error code, the
// HTTP status, or the error text for transport errors.
func errorCode(err error) string {
	if err == nil {
		return ""
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		return fmt.Sprintf("HTTP %d", status.HTTPStatusCode())
	}
	return err.Error()
}

// isCode reports whether err is a KMS error with the given code.
func isCode(err error, code string) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == code
}
