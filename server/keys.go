package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
)

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

// KeyAdmin administers the signing keys: create, import, rotate, activate,
// retire and revoke, each change committed with its audit record. The
// authority makes one (Authority.Admin) over its keyring.
type KeyAdmin struct {
	cfg  Config
	st   store.Keys
	keys *keyring
	now  func() time.Time
	log  *slog.Logger
	// logged tells the transparency log about committed audit records
	// (nil: no log).
	logged func([]audit.Record)
	// changed follows a committed key change (the revocation document is
	// due); requestReady asks for a readiness check.
	changed, requestReady func()
}

// Keys returns every key with its state now.
func (k *KeyAdmin) Keys(ctx context.Context) ([]jwks.View, error) {
	recs, err := k.keys.records(ctx, true)
	if err != nil {
		return nil, err
	}
	return jwks.Derive(k.now(), recs, k.keys.policy), nil
}

// view returns the current view of one key.
func (k *KeyAdmin) view(ctx context.Context, kid string) (jwks.View, error) {
	views, err := k.Keys(ctx)
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
func (k *KeyAdmin) CreateKey(ctx context.Context, algName string) (jwks.View, error) {
	defer k.requestReady() // a key change can make or break readiness
	alg, err := parseAlg(algName)
	if err != nil {
		return jwks.View{}, err
	}
	rec, err := k.makeKey(ctx, audit.KindKeyCreate, alg, nil, nil)
	if err != nil {
		return jwks.View{}, err
	}
	k.log.Info("key created", "kid", rec.KID, "alg", rec.Alg, "uri", backends.Redact(rec.URI), "caller", actorOf(ctx).caller)
	return k.view(ctx, rec.KID)
}

// ImportKey records an existing backend key as pending.
func (k *KeyAdmin) ImportKey(ctx context.Context, uri, algName, kid string) (jwks.View, error) {
	defer k.requestReady() // a key change can make or break readiness
	if uri == "" {
		return jwks.View{}, &InvalidArgumentError{Field: "uri", Reason: "a backend key URI is required"}
	}
	// The URI is stored and reopened for years: it must name one key for
	// good (an alias moves) and carry no secret (a PIN would sit in the
	// database in clear).
	if strings.HasPrefix(uri, "awskms:///alias/") || strings.Contains(uri, ":alias/") {
		return jwks.View{}, &InvalidArgumentError{Field: "uri", Reason: "import the key's ID or ARN, not an alias: an alias can move to another key"}
	}
	if reason := backends.Unpinned(uri); reason != "" {
		return jwks.View{}, &InvalidArgumentError{Field: "uri", Reason: reason}
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
	rec, err := k.record(ctx, uri, backends.OpenOptions{Alg: alg, KID: kid})
	if err != nil {
		return jwks.View{}, &InvalidArgumentError{Field: "uri", Reason: err.Error()}
	}
	// A kid taken from the key itself (a JWK file's "kid") obeys the same
	// rule as one given in the request.
	if err := checkKID("kid", rec.KID); err != nil {
		return jwks.View{}, &InvalidArgumentError{Field: "uri", Reason: "the key's own kid: " + err.Error() + "; pass a kid in the request instead"}
	}
	who := actorOf(ctx)
	_, err = k.changeKeys(ctx, store.KeyCreation, func(_ context.Context, existing []jwks.KeyRecord) (store.KeyChange, error) {
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
	k.log.Info("key imported", "kid", rec.KID, "alg", rec.Alg, "uri", backends.Redact(rec.URI), "caller", who.caller)
	return k.view(ctx, rec.KID)
}

// RotateKey creates a key that is published now and activates at
// now + prepublish, when the active key retires. Until then new cards carry
// both signatures.
func (k *KeyAdmin) RotateKey(ctx context.Context, algName string, prepublish *time.Duration) (jwks.View, error) {
	defer k.requestReady() // a key change can make or break readiness
	alg, err := parseAlg(algName)
	if err != nil {
		return jwks.View{}, err
	}
	wait := k.cfg.Prepublish
	if prepublish != nil {
		if *prepublish < 0 || *prepublish > MaxPrepublish {
			return jwks.View{}, &InvalidArgumentError{Field: "prepublish_seconds", Reason: fmt.Sprintf("must be between 0 and %s, not %s", MaxPrepublish, *prepublish)}
		}
		wait = *prepublish
	}
	// The check runs under the store's key-set lock, before a key is
	// made: of several replicas asked to rotate at once, one makes a key
	// and the others are refused without making one.
	rec, err := k.makeKey(ctx, audit.KindKeyRotate, alg, func(now time.Time, existing []jwks.KeyRecord) error {
		return noScheduledRotation(now, jwks.Derive(now, existing, k.keys.policy))
	}, func(rec *jwks.KeyRecord) {
		at := rec.CreatedAt.Add(wait)
		rec.ActivateAt = &at
	})
	if err != nil {
		return jwks.View{}, err
	}
	at := *rec.ActivateAt
	k.log.Info("key rotation scheduled", "kid", rec.KID, "alg", rec.Alg, "activate_at", at, "caller", actorOf(ctx).caller)
	return k.view(ctx, rec.KID)
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
func (k *KeyAdmin) change(ctx context.Context, kind audit.Kind, kid, reason string, fn func(now time.Time, v jwks.View, all []jwks.View) (jwks.KeyRecord, error)) (jwks.View, error) {
	defer k.requestReady() // a key change can make or break readiness
	// The kid is looked up as given, not checked against today's kid rule:
	// a key recorded before that rule must stay revocable. An unknown kid
	// is NOT_FOUND.
	who := actorOf(ctx)
	_, err := k.changeKeys(ctx, store.KeyTransition, func(_ context.Context, recs []jwks.KeyRecord) (store.KeyChange, error) {
		// The time is taken inside the transaction, which holds the
		// store's write lock: every audit record committed before it has
		// an earlier time, so a revocation's revoked_at follows the last
		// signature by that key in time as well as in commit order.
		now := k.now()
		views := jwks.Derive(now, recs, k.keys.policy)
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
	k.changed()
	return k.view(ctx, kid)
}

// ActivateKey makes a pending key the active key now; the previous active
// key retires at the same instant.
func (k *KeyAdmin) ActivateKey(ctx context.Context, kid string) (jwks.View, error) {
	v, err := k.change(ctx, audit.KindKeyActivate, kid, "", func(now time.Time, v jwks.View, _ []jwks.View) (jwks.KeyRecord, error) {
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
		k.log.Info("key activated", "kid", kid, "caller", actorOf(ctx).caller)
	}
	return v, err
}

// RetireKey stops a key from signing; it stays published for the grace
// period so cards it signed keep verifying.
func (k *KeyAdmin) RetireKey(ctx context.Context, kid string, force bool) (jwks.View, error) {
	v, err := k.change(ctx, audit.KindKeyRetire, kid, "", func(now time.Time, v jwks.View, _ []jwks.View) (jwks.KeyRecord, error) {
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
		k.log.Info("key retired", "kid", kid, "force", force, "caller", actorOf(ctx).caller)
	}
	return v, err
}

// RevokeKey unpublishes a key at once and lists it in the revocation
// document; its kid is never published again.
func (k *KeyAdmin) RevokeKey(ctx context.Context, kid, reason string, force bool) (jwks.View, error) {
	reason, err := checkReason(reason)
	if err != nil {
		return jwks.View{}, err
	}
	v, err := k.change(ctx, audit.KindKeyRevoke, kid, reason, func(now time.Time, v jwks.View, _ []jwks.View) (jwks.KeyRecord, error) {
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
	if err == nil && k.cfg.DisableOnRevoke {
		k.disableAtBackend(ctx, v)
	}
	if err == nil {
		k.log.Warn("key revoked", "kid", kid, "reason", reason, "force", force, "caller", actorOf(ctx).caller)
	}
	return v, err
}

// disableAtBackend switches a revoked key off at its provider. The
// revocation itself is already committed and in force; a failure here is
// logged for an operator to finish by hand, not reported as a failed revoke.
func (k *KeyAdmin) disableAtBackend(ctx context.Context, v jwks.View) {
	scheme, err := backends.Scheme(v.URI)
	if err != nil {
		return
	}
	b, err := k.cfg.Backends.Backend(ctx, scheme)
	if err != nil {
		k.log.Error("on_revoke: disable: the key's backend is not available; disable the key at the provider by hand", "kid", v.KID, "backend", scheme, "err", err)
		return
	}
	d, ok := b.(backends.Disabler)
	if !ok {
		k.log.Info("on_revoke: disable: the backend cannot disable keys", "kid", v.KID, "backend", scheme)
		return
	}
	if err := d.Disable(ctx, v.URI); err != nil {
		k.log.Error("on_revoke: disable failed; disable the key at the provider by hand", "kid", v.KID, "uri", backends.Redact(v.URI), "err", err)
		return
	}
	k.log.Warn("on_revoke: key disabled at its backend", "kid", v.KID, "uri", backends.Redact(v.URI))
}

// CheckBackends fails when a key that is not revoked or expired uses a
// backend that is not configured in this process.
func (k *KeyAdmin) CheckBackends(ctx context.Context) error {
	views, err := k.Keys(ctx)
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
		b, err := k.cfg.Backends.Backend(ctx, scheme)
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

// newKey makes a key in the configured backend and returns its record,
// published now and not yet scheduled to sign. Callers run it inside
// store.MakeKey, under the key-set lock, so a replica that loses a race
// (another replica's rotation committed first) never makes a key at all.
func (k *KeyAdmin) newKey(ctx context.Context, alg jose.Alg) (jwks.KeyRecord, error) {
	if alg == "" {
		alg = k.cfg.DefaultAlg
	}
	b, err := k.cfg.Backends.Backend(ctx, k.cfg.KeyBackend)
	if err != nil {
		return jwks.KeyRecord{}, fmt.Errorf("key backend %q: %w", k.cfg.KeyBackend, err)
	}
	creator, ok := b.(backends.Creator)
	if !ok {
		return jwks.KeyRecord{}, fmt.Errorf("key backend %q cannot create keys", k.cfg.KeyBackend)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return jwks.KeyRecord{}, err
	}
	// A file path for the file backend, an object label elsewhere (an HSM).
	name := fmt.Sprintf("cardsign-%s-%s", k.now().Format("20060102T150405Z"), hex.EncodeToString(rnd[:]))
	if k.cfg.KeyBackend == "file" {
		name = filepath.Join(k.cfg.KeyDir, name+".pem")
	}
	uri, err := creator.Create(ctx, backends.CreateRequest{Alg: alg, Name: name})
	if err != nil {
		return jwks.KeyRecord{}, fmt.Errorf("create %s key: %w", alg, err)
	}
	rec, err := k.record(ctx, uri, backends.OpenOptions{Alg: alg})
	if err != nil {
		// Made but unreadable: not recorded, so say where it is.
		k.log.Error("a key was made at its backend but could not be opened; it is not recorded: delete it there", "uri", backends.Redact(uri), "err", err)
	}
	return rec, err
}

// makeKey makes a new key under the store's key-set lock: check sees every
// key on record first and may refuse, so no backend key is made then. The
// record and its audit record (kind, naming the caller of ctx) are
// committed together.
func (k *KeyAdmin) makeKey(ctx context.Context, kind audit.Kind, alg jose.Alg, check func(now time.Time, existing []jwks.KeyRecord) error, adjust func(*jwks.KeyRecord)) (jwks.KeyRecord, error) {
	var made string // the URI of a key made at its backend
	var rec jwks.KeyRecord
	who := actorOf(ctx)
	// A creation: the backend makes the key while appends go on.
	_, err := k.changeKeys(ctx, store.KeyCreation, func(ctx context.Context, existing []jwks.KeyRecord) (store.KeyChange, error) {
		if check != nil {
			if err := check(k.now(), existing); err != nil {
				return store.KeyChange{}, err
			}
		}
		var err error
		rec, err = k.newKey(ctx, alg)
		if err != nil {
			return store.KeyChange{}, err
		}
		made = rec.URI
		if err := notAlreadyKnown(rec)(existing); err != nil {
			return store.KeyChange{}, err
		}
		if adjust != nil {
			adjust(&rec)
		}
		ar, err := who.keyRecord(kind, rec, "", rec.CreatedAt)
		if err != nil {
			return store.KeyChange{}, err
		}
		return store.KeyChange{Create: &rec, Audit: []audit.Record{ar}}, nil
	})
	if err != nil && made != "" {
		// Made, then not recorded (the store went away at the commit, or
		// the transaction timed out): nobody will use the key, and an
		// operator must know it exists.
		k.log.Error("a key was made at its backend but its record was not committed: delete it there, or import it",
			"uri", backends.Redact(made), "err", err)
	}
	if err != nil {
		return jwks.KeyRecord{}, err
	}
	return rec, nil
}

// record opens a key URI and builds its record: the public JWK is read once,
// here, and never fetched from the backend again.
func (k *KeyAdmin) record(ctx context.Context, uri string, opts backends.OpenOptions) (jwks.KeyRecord, error) {
	open := k.cfg.Backends.Open
	if scheme, err := backends.Scheme(uri); err == nil {
		if b, ok := k.cfg.ImportBackends[scheme]; ok {
			// The restricted backend opens what it checked (the resolved
			// path, no symbolic link swapped in since): checking first and
			// opening through the unrestricted one would leave a window.
			open = func(ctx context.Context, uri string, opts backends.OpenOptions) (signer.Key, error) {
				return backends.OpenWith(ctx, b, uri, opts)
			}
		}
	}
	key, err := open(ctx, uri, opts)
	if err != nil {
		return jwks.KeyRecord{}, err
	}
	pub, err := key.JWK()
	if err != nil {
		return jwks.KeyRecord{}, err
	}
	// The signer is not cached here: the record is not committed yet, and a
	// refused insert must not leave a signer under someone else's kid.
	now := k.now()
	return jwks.KeyRecord{KID: key.KID, URI: uri, Alg: key.Alg, Public: pub, CreatedAt: now, PublishAt: now}, nil
}
