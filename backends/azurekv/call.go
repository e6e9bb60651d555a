//go:build !noazurekv

package azurekv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/internal/retry"
)

// retryPolicy is the backend's policy for the shared retry loop.
func (b *Backend) retryPolicy() *retry.Policy {
	return &retry.Policy{
		Name:           "azurekv",
		Log:            b.log,
		Stats:          &b.stats,
		Backoff:        retry.Backoff{Base: minBackoff, Cap: maxBackoff},
		Window:         unboundedCallLimit,
		AttemptTimeout: b.cfg.AttemptTimeout,
		Describe:       describe,
		Closed:         &b.closed,
		ErrClosed:      ErrClosed,
	}
}

// call is one operation for do.
type call struct {
	op, key string
	limiter retry.Pacer
	// once marks CreateKey: after a 5xx or a broken connection it may have
	// made a version, and a repeat would make another.
	once bool
}

// do runs attempt through the shared retry loop: 429 is throttling, 408,
// 5xx and network failures are transient (CreateKey's only when Key Vault
// answered 429 or 503 before doing anything).
func (b *Backend) do(ctx context.Context, c call, attempt func(context.Context) error) error {
	classify := func(ctx context.Context, err error) retry.Class {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return retry.Interrupted
		}
		var re *azcore.ResponseError
		if !errors.As(err, &re) {
			// The credential's failure: not Key Vault's answer, and the
			// credential has retried its own endpoint already.
			var ae *azidentity.AuthenticationFailedError
			var nr nonRetriable
			if errors.As(err, &ae) || errors.As(err, &nr) {
				return retry.Final
			}
			if c.once {
				return retry.NotRepeated
			}
			return retry.Transient
		}
		switch re.StatusCode {
		case http.StatusTooManyRequests:
			return retry.Throttled
		case http.StatusServiceUnavailable:
			return retry.Transient
		case http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
			if c.once {
				return retry.NotRepeated
			}
			return retry.Transient
		}
		return retry.Final
	}
	return b.retry.Do(ctx, retry.Call{Op: c.op, Key: c.key, Limiter: c.limiter, Classify: classify}, attempt)
}

// nonRetriable is how the Azure SDK marks errors that retrying cannot
// help (an unavailable credential, authentication required).
type nonRetriable interface {
	error
	NonRetriable()
}

// fail types an error of do.
func (b *Backend) fail(op, key string, err error) error {
	var gu *retry.GaveUpError
	if errors.As(err, &gu) {
		return &UnavailableError{Op: op, Key: key, Attempts: gu.Attempts, Err: oneLine(retry.Causes(gu.Last, gu.Reason))}
	}
	if backends.AsAny(err, new(*KeyNotFoundError), new(*KeyStateError), new(*UnsupportedKeyError), new(*DeniedError), new(*HostError), new(*UnavailableError)) {
		return err
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		switch {
		case re.StatusCode == http.StatusNotFound:
			return &KeyNotFoundError{Key: key, Reason: re.ErrorCode}
		case re.StatusCode == http.StatusForbidden && disabled(re):
			return &KeyStateError{Key: key, Reason: "the key is disabled (" + re.ErrorCode + ")"}
		case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
			return &DeniedError{Op: op, Key: key, Status: re.StatusCode, Code: re.ErrorCode}
		}
		return fmt.Errorf("azurekv: %s %s: Key Vault answered %d %s", op, key, re.StatusCode, re.ErrorCode)
	}
	return fmt.Errorf("azurekv: %s %s: %w", op, key, err)
}

// disabled reports whether a 403 is Key Vault refusing a disabled key
// ("Operation sign is not allowed on a disabled key", inner code
// KeyDisabled) rather than a missing permission.
func disabled(re *azcore.ResponseError) bool {
	if re.ErrorCode == "KeyDisabled" {
		return true
	}
	if re.RawResponse == nil || re.RawResponse.Body == nil {
		return false
	}
	return strings.Contains(strings.ToLower(re.Error()), "disabled")
}

// describe names an error briefly for logs.
func describe(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return fmt.Sprintf("HTTP %d %s", re.StatusCode, re.ErrorCode)
	}
	return err.Error()
}

// oneLine chains errs into one error on one line ("a; b").
func oneLine(errs []error) error {
	switch len(errs) {
	case 0:
		return errors.New("no error recorded")
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w; %w", errs[0], oneLine(errs[1:]))
}
