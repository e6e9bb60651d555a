//go:build !noazurekv

package azurekv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
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
		RetryAfter:     retryAfter,
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

// do runs attempt through the shared retry loop: 429 is throttling; 408,
// 5xx and broken connections are transient, except for CreateKey, which
// may have made a version (once); the credential's failures and the SDK's
// own refusals (a challenge it cannot read) are final.
func (b *Backend) do(ctx context.Context, c call, attempt func(context.Context) error) error {
	classify := func(ctx context.Context, err error) retry.Class {
		switch {
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			return retry.Interrupted
		case errors.Is(err, context.DeadlineExceeded):
			// The attempt's own timeout: CreateKey may have made a version.
			if c.once {
				return retry.NotRepeated
			}
			return retry.Interrupted
		}
		var re *azcore.ResponseError
		if !errors.As(err, &re) {
			// The credential's failure: not Key Vault's answer, and the
			// credential has retried its own endpoint already.
			var ae *azidentity.AuthenticationFailedError
			var nr nonRetriable
			if errors.As(err, &ae) || errors.As(err, &nr) || !retry.Network(err) {
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
		case http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			if c.once {
				return retry.NotRepeated
			}
			return retry.Transient
		}
		return retry.Final
	}
	return b.retry.Do(ctx, retry.Call{Op: c.op, Key: c.key, Limiter: c.limiter, Classify: classify}, attempt)
}

// maxRetryAfter caps the wait a Retry-After asks for: past it, the
// caller's deadline decides.
const maxRetryAfter = time.Minute

// retryAfter is the Retry-After of a throttled or unavailable answer, in
// seconds (Key Vault sends seconds), 0 when there is none.
func retryAfter(err error) time.Duration {
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.RawResponse == nil {
		return 0
	}
	secs, err := strconv.Atoi(re.RawResponse.Header.Get("Retry-After"))
	if err != nil || secs <= 0 {
		return 0
	}
	return min(time.Duration(secs)*time.Second, maxRetryAfter)
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
		return &UnavailableError{Op: op, Key: key, Attempts: gu.Attempts, Err: retry.OneLine(brief(gu.Last), gu.Reason)}
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
		return fmt.Errorf("azurekv: %s %s: Key Vault answered %d %q", op, key, re.StatusCode, re.ErrorCode)
	}
	return fmt.Errorf("azurekv: %s %s: %w", op, key, err)
}

// disabled reports whether a 403 is Key Vault refusing a disabled key
// ({"error":{"code":"Forbidden","innererror":{"code":"KeyDisabled"}}},
// "Operation sign is not allowed on a disabled key") rather than a missing
// permission or a firewall.
func disabled(re *azcore.ResponseError) bool {
	if re.ErrorCode == "KeyDisabled" {
		return true
	}
	if re.RawResponse == nil {
		return false
	}
	body, err := runtime.Payload(re.RawResponse)
	if err != nil {
		return false
	}
	var e struct {
		Error struct {
			InnerError struct {
				Code string `json:"code"`
			} `json:"innererror"`
		} `json:"error"`
	}
	return json.Unmarshal(body, &e) == nil && e.Error.InnerError.Code == "KeyDisabled"
}

// brief is err as describe words it: a provider's response (its URL, its
// body) is not repeated whole in an error.
func brief(err error) error {
	var re *azcore.ResponseError
	if err != nil && errors.As(err, &re) {
		return errors.New(describe(err))
	}
	return err
}

// describe names an error briefly for logs.
func describe(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return fmt.Sprintf("HTTP %d %q", re.StatusCode, re.ErrorCode)
	}
	return err.Error()
}
