package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// InvalidArgumentError is a request field that cannot be used.
type InvalidArgumentError struct{ Field, Reason string }

func (e *InvalidArgumentError) Error() string { return e.Field + ": " + e.Reason }

// PreconditionError is a key operation the key's state does not allow.
type PreconditionError struct{ Reason string }

func (e *PreconditionError) Error() string { return e.Reason }

// UnavailableError is a dependency (the store, a key backend) that cannot
// answer now; the caller may retry.
type UnavailableError struct {
	What string
	Err  error
}

func (e *UnavailableError) Error() string { return e.What + " unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// NotFoundError is an unknown kid.
type NotFoundError struct{ KID string }

func (e *NotFoundError) Error() string { return "no key with kid " + e.KID }

func parseAlg(s string) (jose.Alg, error) {
	if s == "" {
		return "", nil
	}
	a, err := jose.ParseAlg(s)
	if err != nil {
		return "", &InvalidArgumentError{Field: "alg", Reason: err.Error()}
	}
	return a, nil
}

// Keys returns every key with its state now.
func (a *Authority) Keys(ctx context.Context) ([]jwks.View, error) {
	recs, err := a.keys.records(ctx, true)
	if err != nil {
		return nil, err
	}
	return jwks.Derive(a.now(), recs, a.policy()), nil
}

// view returns the current view of one key.
func (a *Authority) view(ctx context.Context, kid string) (jwks.View, error) {
	views, err := a.Keys(ctx)
	if err != nil {
		return jwks.View{}, err
	}
	for _, v := range views {
		if v.KID == kid {
			return v, nil
		}
	}
	return jwks.View{}, &NotFoundError{KID: kid}
}

// CreateKey makes a key in the configured backend, published and pending
// until someone activates it.
func (a *Authority) CreateKey(ctx context.Context, algName string) (jwks.View, error) {
	defer a.readiness.request() // a key change can make or break readiness
	alg, err := parseAlg(algName)
	if err != nil {
		return jwks.View{}, err
	}
	rec, err := a.makeKey(ctx, audit.KindKeyCreate, alg, nil, nil)
	if err != nil {
		return jwks.View{}, err
	}
	a.log.Info("key created", "kid", rec.KID, "alg", rec.Alg, "uri", backends.Redact(rec.URI), "caller", actorOf(ctx).caller)
	return a.view(ctx, rec.KID)
}

// ImportKey records an existing backend key as pending.
func (a *Authority) ImportKey(ctx context.Context, uri, algName, kid string) (jwks.View, error) {
	defer a.readiness.request() // a key change can make or break readiness
	if uri == "" {
		return jwks.View{}, &InvalidArgumentError{Field: "uri", Reason: "a backend key URI is required"}
	}
	// The URI is stored and reopened for years: it must name one key for
	// good (an alias moves) and carry no secret (a PIN would sit in the
	// database in clear).
	if strings.HasPrefix(uri, "awskms:///alias/") || strings.Contains(uri, ":alias/") {
		return jwks.View{}, &InvalidArgumentError{Field: "uri", Reason: "import the key's ID or ARN, not an alias: an alias can move to another key"}
	}
	if strings.Contains(strings.ToLower(uri), "pin-value=") {
		return jwks.View{}, &InvalidArgumentError{Field: "uri", Reason: "a PIN in the URI would be stored in clear: use pin-source or the configured PIN"}
	}
	alg, err := parseAlg(algName)
	if err != nil {
		return jwks.View{}, err
	}
	if kid != "" {
		if err := checkKID("kid", kid); err != nil {
			return jwks.View{}, err
		}
	}
	rec, err := a.record(ctx, uri, backends.OpenOptions{Alg: alg, KID: kid})
	if err != nil {
		return jwks.View{}, &InvalidArgumentError{Field: "uri", Reason: err.Error()}
	}
	// A kid taken from the key itself (a JWK file's "kid") obeys the same
	// rule as one given in the request.
	if err := checkKID("kid", rec.KID); err != nil {
		return jwks.View{}, &InvalidArgumentError{Field: "uri", Reason: "the key's own kid: " + err.Error() + "; pass a kid in the request instead"}
	}
	who := actorOf(ctx)
	_, err = a.changeKeys(ctx, store.KeyCreation, func(_ context.Context, existing []jwks.KeyRecord) (store.KeyChange, error) {
		if err := notAlreadyKnown(rec)(existing); err != nil {
			return store.KeyChange{}, err
		}
		ar, err := who.keyRecord(audit.KindKeyImport, rec, "", rec.CreatedAt)
		if err != nil {
			return store.KeyChange{}, err
		}
		return store.KeyChange{Create: &rec, Audit: []audit.Record{ar}}, nil
	})
	if err != nil {
		return jwks.View{}, err
	}
	a.log.Info("key imported", "kid", rec.KID, "alg", rec.Alg, "uri", backends.Redact(rec.URI), "caller", who.caller)
	return a.view(ctx, rec.KID)
}

// RotateKey creates a key that is published now and activates at
// now + prepublish, when the active key retires. Until then new cards carry
// both signatures.
func (a *Authority) RotateKey(ctx context.Context, algName string, prepublish *time.Duration) (jwks.View, error) {
	defer a.readiness.request() // a key change can make or break readiness
	alg, err := parseAlg(algName)
	if err != nil {
		return jwks.View{}, err
	}
	wait := a.cfg.Prepublish
	if prepublish != nil {
		if *prepublish < 0 || *prepublish > MaxPrepublish {
			return jwks.View{}, &InvalidArgumentError{Field: "prepublish_seconds", Reason: fmt.Sprintf("must be between 0 and %s, not %s", MaxPrepublish, *prepublish)}
		}
		wait = *prepublish
	}
	// The check runs under the store's key-set lock, before a key is
	// made: of several replicas asked to rotate at once, one makes a key
	// and the others are refused without making one.
	rec, err := a.makeKey(ctx, audit.KindKeyRotate, alg, func(now time.Time, existing []jwks.KeyRecord) error {
		return noScheduledRotation(now, jwks.Derive(now, existing, a.policy()))
	}, func(rec *jwks.KeyRecord) {
		at := rec.CreatedAt.Add(wait)
		rec.ActivateAt = &at
	})
	if err != nil {
		return jwks.View{}, err
	}
	at := *rec.ActivateAt
	a.log.Info("key rotation scheduled", "kid", rec.KID, "alg", rec.Alg, "activate_at", at, "caller", actorOf(ctx).caller)
	return a.view(ctx, rec.KID)
}

// noScheduledRotation refuses a second rotation while one is scheduled: two
// pending keys would make every card carry three signatures.
func noScheduledRotation(now time.Time, views []jwks.View) error {
	for _, v := range views {
		if (v.State == jwks.StatePending || v.State == jwks.StateScheduled) && v.ActivateAt != nil && v.ActivateAt.After(now) {
			return &PreconditionError{Reason: fmt.Sprintf("a rotation is already scheduled: %s activates at %s; activate or revoke it first", v.KID, v.ActivateAt.Format(time.RFC3339))}
		}
	}
	return nil
}

// notAlreadyKnown refuses key material the store already has under any kid,
// in any state: a revoked key must never come back under a new kid.
func notAlreadyKnown(rec jwks.KeyRecord) func([]jwks.KeyRecord) error {
	return func(existing []jwks.KeyRecord) error {
		for _, e := range existing {
			if e.URI == rec.URI || (e.Public.X == rec.Public.X && e.Public.Y == rec.Public.Y && e.Public.N == rec.Public.N && e.Public.Kty == rec.Public.Kty) {
				return &PreconditionError{Reason: fmt.Sprintf("this key is already recorded as %s; a key is recorded once (a revoked key is never brought back)", e.KID)}
			}
		}
		return nil
	}
}

// change runs a state transition on one key inside a store transaction,
// with every key's state derived from the records the transaction read, and
// commits its audit record (kind, naming the caller of ctx and reason) in
// the same transaction.
func (a *Authority) change(ctx context.Context, kind audit.Kind, kid, reason string, fn func(now time.Time, v jwks.View, all []jwks.View) (jwks.KeyRecord, error)) (jwks.View, error) {
	defer a.readiness.request() // a key change can make or break readiness
	// The kid is looked up as given, not checked against today's kid rule:
	// a key recorded before that rule must stay revocable. An unknown kid
	// is NOT_FOUND.
	who := actorOf(ctx)
	_, err := a.changeKeys(ctx, store.KeyTransition, func(_ context.Context, recs []jwks.KeyRecord) (store.KeyChange, error) {
		// The time is taken inside the transaction, which holds the
		// store's write lock: every audit record committed before it has
		// an earlier time, so a revocation's revoked_at follows the last
		// signature by that key in time as well as in commit order.
		now := a.now()
		views := jwks.Derive(now, recs, a.policy())
		for _, v := range views {
			if v.KID == kid {
				rec, err := fn(now, v, views)
				if err != nil {
					return store.KeyChange{}, err
				}
				ar, err := who.keyRecord(kind, rec, reason, now)
				if err != nil {
					return store.KeyChange{}, err
				}
				return store.KeyChange{Update: []jwks.KeyRecord{rec}, Audit: []audit.Record{ar}}, nil
			}
		}
		return store.KeyChange{}, &NotFoundError{KID: kid}
	})
	if err != nil {
		return jwks.View{}, err
	}
	a.revocations.forget()
	a.pokeDuties()
	return a.view(ctx, kid)
}

// ActivateKey makes a pending key the active key now; the previous active
// key retires at the same instant.
func (a *Authority) ActivateKey(ctx context.Context, kid string) (jwks.View, error) {
	v, err := a.change(ctx, audit.KindKeyActivate, kid, "", func(now time.Time, v jwks.View, _ []jwks.View) (jwks.KeyRecord, error) {
		switch v.State {
		case jwks.StateActive:
			return jwks.KeyRecord{}, &PreconditionError{Reason: "key " + kid + " is already active"}
		case jwks.StatePending, jwks.StateScheduled:
		default:
			return jwks.KeyRecord{}, &PreconditionError{Reason: fmt.Sprintf("key %s is %s; only a pending key can be activated", kid, v.State)}
		}
		rec := v.KeyRecord
		rec.ActivateAt = &now
		if rec.PublishAt.After(now) {
			rec.PublishAt = now
		}
		return rec, nil
	})
	if err == nil {
		a.log.Info("key activated", "kid", kid, "caller", actorOf(ctx).caller)
	}
	return v, err
}

// RetireKey stops a key from signing; it stays published for the grace
// period so cards it signed keep verifying.
func (a *Authority) RetireKey(ctx context.Context, kid string, force bool) (jwks.View, error) {
	v, err := a.change(ctx, audit.KindKeyRetire, kid, "", func(now time.Time, v jwks.View, _ []jwks.View) (jwks.KeyRecord, error) {
		switch v.State {
		case jwks.StateActive:
			if !force {
				return jwks.KeyRecord{}, &PreconditionError{Reason: "key " + kid + " is the active key: retiring it stops signing until another key is activated (use --force), or rotate instead"}
			}
		case jwks.StatePending, jwks.StateScheduled:
		default:
			return jwks.KeyRecord{}, &PreconditionError{Reason: fmt.Sprintf("key %s is already %s", kid, v.State)}
		}
		rec := v.KeyRecord
		rec.RetireAt = &now
		return rec, nil
	})
	if err == nil {
		a.log.Info("key retired", "kid", kid, "force", force, "caller", actorOf(ctx).caller)
	}
	return v, err
}

// RevokeKey unpublishes a key at once and lists it in the revocation
// document; its kid is never published again.
func (a *Authority) RevokeKey(ctx context.Context, kid, reason string, force bool) (jwks.View, error) {
	reason, err := checkReason(reason)
	if err != nil {
		return jwks.View{}, err
	}
	v, err := a.change(ctx, audit.KindKeyRevoke, kid, reason, func(now time.Time, v jwks.View, _ []jwks.View) (jwks.KeyRecord, error) {
		if v.State == jwks.StateRevoked {
			return jwks.KeyRecord{}, &PreconditionError{Reason: "key " + kid + " is already revoked"}
		}
		if v.State == jwks.StateActive && !force {
			return jwks.KeyRecord{}, &PreconditionError{Reason: "key " + kid + " is the only active key: revoking it stops all signing until a new key is activated; pass --force to do it anyway"}
		}
		rec := v.KeyRecord
		rec.RevokedAt = &now
		rec.RevokeReason = reason
		return rec, nil
	})
	if err == nil && a.cfg.DisableOnRevoke {
		a.disableAtBackend(ctx, v)
	}
	if err == nil {
		a.log.Warn("key revoked", "kid", kid, "reason", reason, "force", force, "caller", actorOf(ctx).caller)
	}
	return v, err
}

// disableAtBackend switches a revoked key off at its provider. The
// revocation itself is already committed and in force; a failure here is
// logged for an operator to finish by hand, not reported as a failed revoke.
func (a *Authority) disableAtBackend(ctx context.Context, v jwks.View) {
	scheme, err := backends.Scheme(v.URI)
	if err != nil {
		return
	}
	b, err := a.cfg.Backends.Backend(ctx, scheme)
	if err != nil {
		a.log.Error("on_revoke: disable: the key's backend is not available; disable the key at the provider by hand", "kid", v.KID, "backend", scheme, "err", err)
		return
	}
	d, ok := b.(backends.Disabler)
	if !ok {
		a.log.Info("on_revoke: disable: the backend cannot disable keys", "kid", v.KID, "backend", scheme)
		return
	}
	if err := d.Disable(ctx, v.URI); err != nil {
		a.log.Error("on_revoke: disable failed; disable the key at the provider by hand", "kid", v.KID, "uri", backends.Redact(v.URI), "err", err)
		return
	}
	a.log.Warn("on_revoke: key disabled at its backend", "kid", v.KID, "uri", backends.Redact(v.URI))
}

// CheckBackends fails when a key that is not revoked or expired uses a
// backend that is not configured in this process.
func (a *Authority) CheckBackends(ctx context.Context) error {
	views, err := a.Keys(ctx)
	if err != nil {
		return err
	}
	for _, v := range views {
		if v.State == jwks.StateRevoked || v.State == jwks.StateExpired {
			continue
		}
		scheme, err := backends.Scheme(v.URI)
		if err != nil {
			return fmt.Errorf("key %s: %w", v.KID, err)
		}
		b, err := a.cfg.Backends.Backend(ctx, scheme)
		var unknown *backends.UnknownSchemeError
		switch {
		case errors.As(err, &unknown):
			return fmt.Errorf("key %s (%s) uses the %s backend, which is not configured: add its section to the config", v.KID, v.State, scheme)
		case err != nil:
			return fmt.Errorf("key %s (%s): %w", v.KID, v.State, err)
		}
		// A key whose URI the backend's configuration no longer accepts (a
		// pin-source outside pkcs11.pin_source_dirs) would fail at its
		// first signature: say so now, naming the key.
		if c, ok := b.(backends.URIChecker); ok {
			if err := c.CheckURI(v.URI); err != nil {
				return fmt.Errorf("key %s (%s): %w", v.KID, v.State, err)
			}
		}
	}
	return nil
}
