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

// do runs attempt through the shared retry loop.
func (b *Backend) do(ctx context.Context, c call, attempt func(context.Context) error) error {
	relogged := false
	classify := func(ctx context.Context, err error) retry.Class {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return retry.Interrupted
		}
		// The session's own calls retried already: its failure ends this one.
		if backends.AsAny(err, new(*LoginError), new(*UnavailableError)) {
			return retry.Final
		}
		var re *api.ResponseError
		if !errors.As(err, &re) {
			if c.idempotent {
				return retry.Transient // the network: a fresh connection may do
			}
			return retry.NotRepeated
		}
		switch re.StatusCode {
		case http.StatusTooManyRequests:
			return retry.Throttled
		case http.StatusServiceUnavailable, http.StatusPreconditionFailed:
			// Sealed, a standby, or a performance standby behind on its
			// WAL (412): nothing was done.
			return retry.Transient
		case http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
			if c.idempotent {
				return retry.Transient
			}
			return retry.NotRepeated
		case http.StatusForbidden:
			// An expired or revoked token: log in again, once per call.
			if c.authed && !relogged && b.sess.invalidate(b.sess.current()) {
				relogged = true
				return retry.Transient
			}
		}
		return retry.Final
	}
	return b.retry.Do(ctx, retry.Call{Op: c.op, Key: c.key, Limiter: c.limiter, Classify: classify}, func(ctx context.Context) error {
		if c.authed {
			if err := b.sess.ensure(ctx); err != nil {
				return err
			}
		}
		return attempt(ctx)
	})
}

// fail types an error of do for the caller: a give-up is unavailability,
// a 403 a denial, a 404 a missing key; others keep Vault's message.
func (b *Backend) fail(op, key string, err error) error {
	var gu *retry.GaveUpError
	if errors.As(err, &gu) {
		return &UnavailableError{Op: op, Key: key, Attempts: gu.Attempts, Err: oneLine(retry.Causes(gu.Last, gu.Reason))}
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

// describe names an error briefly for logs.
func describe(err error) string {
	var re *api.ResponseError
	if errors.As(err, &re) {
		return fmt.Sprintf("HTTP %d: %s", re.StatusCode, vaultErrors(re.Errors))
	}
	return err.Error()
}

// oneLine chains errs into one error on one line ("a; b"), each still
// reachable with errors.Is and errors.As.
func oneLine(errs []error) error {
	switch len(errs) {
	case 0:
		return errors.New("no error recorded")
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w; %w", errs[0], oneLine(errs[1:]))
}
