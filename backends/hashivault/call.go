//go:build !novault

package hashivault

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/openbao/openbao/api/v2"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/internal/retry"
)

// retryPolicy is the backend's policy for the shared retry loop.
func (b *Backend) retryPolicy() *retry.Policy {
	return &retry.Policy{
		Name:           "hashivault",
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
	// idempotent operations may be repeated after a 5xx or a broken
	// connection; others (rotate) only when Vault answered before doing
	// anything (429, 503 sealed or standby).
	idempotent bool
	// authed calls need the session's token, and may log in again once
	// when Vault refuses it.
	authed bool
}

// do runs attempt through the shared retry loop. 429 is throttling; 503
// (sealed, standby), 412 (a performance standby behind), 5xx and broken
// connections are transient for idempotent calls, and end others (a
// rotation may have taken effect); a 403 to an authed call logs in again,
// once per call, when the session can.
func (b *Backend) do(ctx context.Context, c call, attempt func(context.Context) error) error {
	relogged := false
	var used, stale string // the token the last attempt sent; the one Vault refused
	var refusal error      // Vault's 403 to stale
	classify := func(ctx context.Context, err error) retry.Class {
		switch {
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			return retry.Interrupted
		case errors.Is(err, context.DeadlineExceeded):
			// The attempt's own timeout: it may have taken effect, so only an
			// idempotent call is sent again (while the call has time).
			if !c.idempotent {
				return retry.NotRepeated
			}
			return retry.Interrupted
		case backends.AsAny(err, new(*LoginError), new(*UnavailableError)):
			// The session's own calls retried already: its failure ends this one.
			return retry.Final
		}
		var re *api.ResponseError
		if !errors.As(err, &re) {
			if !retry.Network(err) {
				return retry.Final
			}
			if c.idempotent {
				return retry.Transient // the network: a fresh connection may do
			}
			return retry.NotRepeated
		}
		switch re.StatusCode {
		case http.StatusTooManyRequests:
			return retry.Throttled
		case http.StatusServiceUnavailable, http.StatusPreconditionFailed,
			http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
			if c.idempotent {
				return retry.Transient
			}
			return retry.NotRepeated
		case http.StatusForbidden:
			// An expired or revoked token: log in again, once per call.
			if c.authed && !relogged && b.sess.canLogin() {
				relogged, stale, refusal = true, used, err
				return retry.Transient
			}
		}
		return retry.Final
	}
	return b.retry.Do(ctx, retry.Call{Op: c.op, Key: c.key, Limiter: c.limiter, Classify: classify}, func(ctx context.Context) error {
		if c.authed {
			// A 403 to a token Vault still honours is the policy's answer:
			// logging in again would not change it (and would spend a
			// secret ID's uses), so it is returned as it is.
			if stale != "" && b.sess.honoured(ctx, stale) {
				return refusal
			}
			if err := b.sess.get(ctx, stale); err != nil {
				return err
			}
			stale, used = "", b.sess.current()
		}
		return attempt(ctx)
	})
}

// fail types an error of do for the caller: a give-up is unavailability,
// a 403 a denial, a 404 a missing key; others keep Vault's message.
func (b *Backend) fail(op, key string, err error) error {
	var gu *retry.GaveUpError
	if errors.As(err, &gu) {
		return &UnavailableError{Op: op, Key: key, Attempts: gu.Attempts, Err: retry.OneLine(brief(gu.Last), gu.Reason)}
	}
	if backends.AsAny(err, new(*KeyNotFoundError), new(*UnsupportedKeyError), new(*DeniedError), new(*UnavailableError), new(*LoginError)) {
		return err
	}
	var re *api.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusForbidden:
			return &DeniedError{Op: op, Path: key, Errors: vaultErrors(re.Errors)}
		case http.StatusNotFound:
			return &KeyNotFoundError{Key: key, Reason: vaultErrors(re.Errors)}
		}
		return fmt.Errorf("hashivault: %s %s: Vault answered %d: %s", op, key, re.StatusCode, vaultErrors(re.Errors))
	}
	return fmt.Errorf("hashivault: %s %s: %w", op, key, err)
}

// brief is err as describe words it, on one line: a provider's response
// (its URL, its body) is not repeated whole in an error.
func brief(err error) error {
	if err == nil {
		return nil
	}
	var re *api.ResponseError
	if errors.As(err, &re) {
		return errors.New(describe(err))
	}
	return err
}

// describe names an error briefly for logs.
func describe(err error) string {
	var re *api.ResponseError
	if errors.As(err, &re) {
		return fmt.Sprintf("HTTP %d: %s", re.StatusCode, vaultErrors(re.Errors))
	}
	return err.Error()
}
