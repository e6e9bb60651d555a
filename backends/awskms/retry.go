//go:build !noawskms

package awskms

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/cardsign/cardsign/backends/internal/kmsstats"
	"github.com/cardsign/cardsign/backends/internal/retry"
)

// Retry settings for backends/internal/retry: full jitter from 25ms, capped
// at 2s; retryWindow bounds the retries of a call whose context has no
// deadline (with a deadline, the deadline does).
const (
	backoffBase = 25 * time.Millisecond
	backoffCap  = 2 * time.Second
	retryWindow = 30 * time.Second
	// burstWindow sizes each key's burst: a tenth of a second's worth of
	// requests, enough for a few cards arriving together, too little to
	// overrun a KMS quota set at the same rate.
	burstWindow = 100 * time.Millisecond
)

// Stats are the backend's counters since New, for the daemon's metrics.
// They cover every KMS request the backend makes (Sign, DescribeKey,
// GetPublicKey, CreateKey, alias updates, DisableKey). It is the one stats
// type of the KMS backends.
type Stats = kmsstats.Stats

// Stats returns a snapshot of the counters.
func (b *Backend) Stats() Stats { return b.stats.Snapshot() }

// retryPolicy is the backend's policy for the shared retry loop.
func (b *Backend) retryPolicy() *retry.Policy {
	return &retry.Policy{
		Name:      "awskms",
		Log:       b.log,
		Stats:     &b.stats,
		Backoff:   retry.Backoff{Base: backoffBase, Cap: backoffCap},
		Window:    retryWindow,
		Describe:  errorCode,
		Closed:    &b.closed,
		ErrClosed: ErrClosed,
	}
}

// call describes one KMS operation for do.
type call struct {
	op      string      // the KMS operation, for errors and logs
	key     string      // the key (or alias, or KeySpec), for errors and logs
	limiter retry.Pacer // per-key rate limit, nil for none
	// idempotent operations are retried after any transient error; the
	// others (CreateKey) only after throttling, which KMS answers without
	// executing the request: a retry after a 5xx might create a second key.
	idempotent bool
}

// do runs fn, one KMS request per call, through the shared retry loop. It
// returns nil, fn's error for a permanent failure, the context's error for
// a cancellation, or an *UnavailableError.
func (b *Backend) do(ctx context.Context, c call, fn func(context.Context) error) error {
	err := b.retry.Do(ctx, retry.Call{Op: c.op, Key: c.key, Limiter: c.limiter, Classify: c.classify}, fn)
	var gu *retry.GaveUpError
	if errors.As(err, &gu) {
		return &UnavailableError{Op: c.op, Key: c.key, Attempts: gu.Attempts, Err: gu.Last, Reason: gu.Reason}
	}
	return err
}

// classify is the retry.Classifier of c: classify's verdict, with a
// context error while ctx is live counted as the network's doing (a
// timeout inside the SDK or HTTP client), and a transient failure of a
// non-idempotent operation not repeated.
func (c call) classify(ctx context.Context, err error) retry.Class {
	kind := classify(err)
	if kind == retry.Interrupted && ctx.Err() == nil {
		kind = retry.Transient
	}
	if kind == retry.Transient && !c.idempotent {
		return retry.NotRepeated
	}
	return kind
}

// classify sorts an SDK error. With the SDK's retryer off, this list is the
// retry policy: KMS's documented retryable exceptions, any 5xx or 429, and
// failures to send the request or read the response. A context error is
// Interrupted: the call's own context may have ended it.
func classify(err error) retry.Class {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return retry.Interrupted
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ThrottlingException", "LimitExceededException", "TooManyRequestsException", "RequestLimitExceeded", "Throttling":
			return retry.Throttled
		case "KMSInternalException", "DependencyTimeoutException", "KeyUnavailableException",
			"InternalFailure", "InternalServerError", "ServiceUnavailable", "ServiceUnavailableException":
			return retry.Transient
		}
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		switch code := status.HTTPStatusCode(); {
		case code == 429:
			return retry.Throttled
		case code >= 500:
			return retry.Transient
		}
	}
	var send *smithyhttp.RequestSendError
	var netErr net.Error
	if errors.As(err, &send) || errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) {
		return retry.Transient
	}
	return retry.Final
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
