package sqlrows

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// KeyColumns are the keys table's columns, in the order of Key.Args and
// Key.Dest.
const KeyColumns = `kid, uri, alg, public_jwk, created_at, publish_at, activate_at, retire_at, expire_at, revoked_at, revoke_reason`

// Key is a KeyRecord in column form: times as unix nanoseconds UTC
// (store.Nanos), nil for NULL.
type Key struct {
	KID, URI, Alg, JWK                        string
	CreatedAt, PublishAt                      int64
	ActivateAt, RetireAt, ExpireAt, RevokedAt *int64
	RevokeReason                              string
}

// EncodeKey checks rec can be stored and read back unchanged, and converts
// it.
func EncodeKey(rec jwks.KeyRecord) (Key, error) {
	jwk, err := store.KeyJWK(rec)
	if err != nil {
		return Key{}, err
	}
	k := Key{KID: rec.KID, URI: rec.URI, Alg: string(rec.Alg), JWK: string(jwk), RevokeReason: rec.RevokeReason}
	if k.CreatedAt, err = store.Nanos(rec.CreatedAt); err != nil {
		return Key{}, fmt.Errorf("created_at: %w", err)
	}
	if k.PublishAt, err = store.Nanos(rec.PublishAt); err != nil {
		return Key{}, fmt.Errorf("publish_at: %w", err)
	}
	for _, f := range []struct {
		name string
		src  *time.Time
		dst  **int64
	}{
		{"activate_at", rec.ActivateAt, &k.ActivateAt},
		{"retire_at", rec.RetireAt, &k.RetireAt},
		{"expire_at", rec.ExpireAt, &k.ExpireAt},
		{"revoked_at", rec.RevokedAt, &k.RevokedAt},
	} {
		if *f.dst, err = nullNanos(f.src); err != nil {
			return Key{}, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return k, nil
}

// Args are k's values in KeyColumns order, for an INSERT.
func (k Key) Args() []any {
	return []any{k.KID, k.URI, k.Alg, k.JWK, k.CreatedAt, k.PublishAt, k.ActivateAt, k.RetireAt, k.ExpireAt, k.RevokedAt, k.RevokeReason}
}

// UpdateArgs are k's mutable values, then its kid: publish_at, activate_at,
// retire_at, expire_at, revoked_at, revoke_reason, kid.
func (k Key) UpdateArgs() []any {
	return []any{k.PublishAt, k.ActivateAt, k.RetireAt, k.ExpireAt, k.RevokedAt, k.RevokeReason, k.KID}
}

// Record converts k back, checking its public key.
func (k Key) Record() (jwks.KeyRecord, error) {
	pub, err := jose.ParseJWK([]byte(k.JWK))
	if err != nil {
		return jwks.KeyRecord{}, fmt.Errorf("key %s: public key: %w", k.KID, err)
	}
	return jwks.KeyRecord{
		KID:          k.KID,
		URI:          k.URI,
		Alg:          jose.Alg(k.Alg),
		Public:       pub,
		CreatedAt:    store.FromNanos(k.CreatedAt),
		PublishAt:    store.FromNanos(k.PublishAt),
		ActivateAt:   fromNullNanos(k.ActivateAt),
		RetireAt:     fromNullNanos(k.RetireAt),
		ExpireAt:     fromNullNanos(k.ExpireAt),
		RevokedAt:    fromNullNanos(k.RevokedAt),
		RevokeReason: k.RevokeReason,
	}, nil
}

// scanKey reads one row of KeyColumns.
func scanKey(rows Rows) (jwks.KeyRecord, error) {
	var k Key
	if err := rows.Scan(&k.KID, &k.URI, &k.Alg, &k.JWK, &k.CreatedAt, &k.PublishAt,
		&k.ActivateAt, &k.RetireAt, &k.ExpireAt, &k.RevokedAt, &k.RevokeReason); err != nil {
		return jwks.KeyRecord{}, err
	}
	return k.Record()
}

// ListKeys reads every key record with sql, a SELECT of KeyColumns in the
// dialect's order (CreatedAt, then KID bytewise).
func ListKeys(ctx context.Context, q Querier, sql string) ([]jwks.KeyRecord, error) {
	return query(ctx, q, scanKey, sql)
}

// keyTrailQuery reads the kinds and kids of the records that are neither
// signatures nor refusals: the key administration records among them.
const keyTrailQuery = `SELECT DISTINCT outcome, kid FROM audit WHERE outcome NOT IN ('signed', 'refused')`

// KeyTrailKids says whether a key.baseline record exists and which kids
// key administration records name.
func KeyTrailKids(ctx context.Context, q Querier) (baselined bool, audited map[string]bool, err error) {
	type kindKid struct{ kind, kid string }
	rows, err := query(ctx, q, func(r Rows) (kindKid, error) {
		var v kindKid
		return v, r.Scan(&v.kind, &v.kid)
	}, keyTrailQuery)
	if err != nil {
		return false, nil, err
	}
	audited = map[string]bool{}
	for _, r := range rows {
		if audit.Kind(r.kind).IsKey() {
			audited[r.kid] = true
			baselined = baselined || audit.Kind(r.kind) == audit.KindKeyBaseline
		}
	}
	return baselined, audited, nil
}

// KeyChangeTx runs a key change in the store's transaction: ChangeKeys and
// BaselineKeys give it fn, which sees the transaction's Querier.
type KeyChangeTx func(ctx context.Context, fn KeyChangeFunc) ([]audit.Record, error)

// BaselineKeys is store.Keys.BaselineKeys over a store: listKeys (the
// store's ListKeys SQL) and q outside a transaction, change (a
// KeyTransition) inside one.
func BaselineKeys(ctx context.Context, q Querier, listKeys string, change KeyChangeTx, rec func(jwks.KeyRecord) (audit.Record, error)) ([]audit.Record, error) {
	// Looked at first without a lock, so a start whose keys all have a
	// record (every start after the first) does not hold up appends.
	baselined, audited, err := KeyTrailKids(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("store: baseline keys: %w", err)
	}
	keys, err := ListKeys(ctx, q, listKeys)
	if err != nil {
		return nil, fmt.Errorf("store: baseline keys: %w", err)
	}
	if !store.NeedsBaseline(keys, baselined, audited) {
		return nil, nil
	}
	return change(ctx, func(ctx context.Context, tx Querier, recs []jwks.KeyRecord) (store.KeyChange, error) {
		baselined, audited, err := KeyTrailKids(ctx, tx)
		if err != nil {
			return store.KeyChange{}, fmt.Errorf("store: baseline keys: %w", err)
		}
		return store.BaselineChange(recs, baselined, audited, rec)
	})
}

// nullNanos is a nullable time column's value.
func nullNanos(t *time.Time) (*int64, error) {
	if t == nil {
		return nil, nil
	}
	n, err := store.Nanos(*t)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// fromNullNanos reads a nullable time column.
func fromNullNanos(n *int64) *time.Time {
	if n == nil {
		return nil
	}
	t := store.FromNanos(*n)
	return &t
}

// KeyChangeFunc is the caller's change: fn of store.Keys.ChangeKeys, given
// the transaction's Querier.
type KeyChangeFunc func(ctx context.Context, tx Querier, recs []jwks.KeyRecord) (store.KeyChange, error)

// PreparedKeyChange is a change a KeyChangeFunc returned, checked: its
// audit records as they will be appended and their times
// (store.PrepareKeyChange).
type PreparedKeyChange struct {
	store.KeyChange
	Records []audit.Record
	Times   []int64
}

// PrepareKeyChange is the part of a key change both stores do alike,
// inside the store's transaction tx and under its locks: it reads every key
// record (listKeys, the store's ListKeys SQL), runs fn over them, and checks
// the change fn returns. An fn error is stored in *fnErr (the caller's
// error, returned as is) and returned.
func PrepareKeyChange(ctx context.Context, tx Querier, listKeys string, fn KeyChangeFunc, fnErr *error) (PreparedKeyChange, error) {
	recs, err := ListKeys(ctx, tx, listKeys)
	if err != nil {
		return PreparedKeyChange{}, err
	}
	stored := slices.Clone(recs) // fn may change recs in place
	ch, err := fn(ctx, tx, recs)
	if err != nil {
		*fnErr = err
		return PreparedKeyChange{}, err
	}
	p := PreparedKeyChange{KeyChange: ch}
	if p.Records, p.Times, err = store.PrepareKeyChange(stored, ch); err != nil {
		return PreparedKeyChange{}, err
	}
	return p, nil
}

// PrepareKeyUpdate is the part of store.Keys.UpdateKeys both stores do
// alike, inside the store's transaction tx and under its locks: it reads
// every key record, runs fn over them and checks the records fn returns
// (store.CheckUpdates), which the store then writes. An fn error is stored
// in *fnErr (the caller's error, returned as is) and returned.
func PrepareKeyUpdate(ctx context.Context, tx Querier, listKeys string, fn func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error), fnErr *error) ([]jwks.KeyRecord, error) {
	recs, err := ListKeys(ctx, tx, listKeys)
	if err != nil {
		return nil, err
	}
	stored := slices.Clone(recs) // fn may change recs in place
	updated, err := fn(recs)
	if err != nil {
		*fnErr = err
		return nil, err
	}
	if err := store.CheckUpdates(stored, updated); err != nil {
		return nil, err
	}
	return updated, nil
}
