//go:build !nogcpkms

package gcpkms

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/internal/kmsstats"
	"github.com/cardsign/cardsign/backends/internal/retry"
)

// Retry pacing for backends/internal/retry: full jitter from 50ms, capped
// at 2s. unboundedCallLimit bounds the retries of an operation whose
// context has no deadline (crypto.Signer.Sign, a CLI without a timeout): an
// outage must end in an error, not a hang.
const (
	minBackoff         = 50 * time.Millisecond
	maxBackoff         = 2 * time.Second
	unboundedCallLimit = 30 * time.Second
	// burstWindow sizes each key version's burst: one second's worth.
	// Cloud KMS quotas are per minute, so a burst this size is harmless,
	// and a daemon that was idle serves a sudden batch of cards at once.
	burstWindow = time.Second
)

// Stats are the backend's counters since New, for metrics. Every call to
// Cloud KMS (sign, public key, key version reads, create, disable) counts.
// It is the one stats type of the KMS backends.
type Stats = kmsstats.Stats

// Stats returns the counters since New.
func (b *Backend) Stats() Stats { return b.stats.Snapshot() }

// retryPolicy is the backend's policy for the shared retry loop. Each
// attempt gets at most Config.AttemptTimeout.
func (b *Backend) retryPolicy() *retry.Policy {
	return &retry.Policy{
		Name:           "gcpkms",
		Log:            b.log,
		Stats:          &b.stats,
		Backoff:        retry.Backoff{Base: minBackoff, Cap: maxBackoff},
		Window:         unboundedCallLimit,
		AttemptTimeout: b.cfg.AttemptTimeout,
		Describe: func(err error) string {
			if s, ok := status.FromError(err); ok {
				return s.Code().String()
			}
			return err.Error()
		},
		Closed:    &b.closed,
		ErrClosed: ErrClosed,
	}
}

// op describes one operation for call.
type op struct {
	what string // "sign", "get public key", ... for errors and logs
	name string // the resource
	// limiter, when set, paces every attempt (the per-key-version rate).
	limiter retry.Pacer
	// once marks operations that must not be repeated once they may have
	// taken effect (CreateCryptoKeyVersion would make a second version):
	// they are retried only on RESOURCE_EXHAUSTED and UNAVAILABLE, which
	// Cloud KMS answers before doing anything.
	once bool
}

// call runs attempt through the shared retry loop, which owns all
// retrying: the client library's own retries are switched off (New), so
// every attempt is counted, paced by the rate limit and bounded by the
// deadline there.
//
// Throttling (RESOURCE_EXHAUSTED), UNAVAILABLE and DEADLINE_EXCEEDED of an
// attempt are retried after a backoff, unless the wait would pass the
// deadline: then call gives up at once with an *UnavailableError rather
// than sleep into a failure. A response failing its integrity checks is
// retried once when it may have been damaged in transit. Other errors are
// returned typed where callers branch (not found, wrong state).
func (b *Backend) call(ctx context.Context, o op, attempt func(ctx context.Context) error) error {
	err := b.retry.Do(ctx, retry.Call{Op: o.what, Key: o.name, Limiter: o.limiter, Classify: o.classifier(b)}, attempt)
	var gu *retry.GaveUpError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &gu):
		return &UnavailableError{Op: o.what, Name: o.name, Attempts: gu.Attempts, Err: retry.OneLine(gu.Last, gu.Reason)}
	}
	return b.permanent(o, err)
}

// classifier returns the retry.Classifier of one call of o. It keeps state:
// a damaged response is retried once per call, not once per attempt.
func (o op) classifier(b *Backend) retry.Classifier {
	integrityRetried := false
	return func(ctx context.Context, err error) retry.Class {
		var ie *IntegrityError
		if errors.As(err, &ie) {
			if !ie.retry || integrityRetried {
				b.log.Warn("gcpkms: response failed its integrity check", "op", o.what, "key", o.name, "field", ie.Field, "err", err)
				return retry.Final
			}
			integrityRetried = true
			return retry.Transient
		}
		code := status.Code(err)
		if ctx.Err() != nil && (code == codes.DeadlineExceeded || code == codes.Canceled) {
			return retry.Interrupted
		}
		switch code {
		case codes.ResourceExhausted:
			return retry.Throttled
		case codes.Unavailable:
			return retry.Transient
		case codes.DeadlineExceeded:
			// Not for an operation that must not run twice: the attempt
			// may have taken effect.
			if o.once {
				return retry.Final
			}
			return retry.Transient
		}
		return retry.Final
	}
}

// permanent types a final, non-retryable error.
func (b *Backend) permanent(o op, err error) error {
	switch status.Code(err) {
	case codes.NotFound:
		return &KeyNotFoundError{Name: o.name, Err: err}
	case codes.FailedPrecondition:
		return &KeyStateError{Name: o.name, Err: err}
	}
	if backends.AsAny(err, new(*KeyStateError), new(*KeyNotFoundError), new(*UnsupportedAlgorithmError), new(*IntegrityError)) {
		return err
	}
	return fmt.Errorf("gcpkms: %s %s: %w", o.what, o.name, err)
}
