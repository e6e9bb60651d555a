package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

const keyColumns = `kid, uri, alg, public_jwk, created_at, publish_at, activate_at, retire_at, expire_at, revoked_at, revoke_reason`

// keyRow is a KeyRecord in column form.
type keyRow struct {
	kid, uri, alg, jwk                        string
	createdAt, publishAt                      int64
	activateAt, retireAt, expireAt, revokedAt sql.NullInt64
	revokeReason                              string
}

// encodeKey checks rec can be stored and read back unchanged, and converts it.
func encodeKey(rec jwks.KeyRecord) (keyRow, error) {
	jwk, err := store.KeyJWK(rec)
	if err != nil {
		return keyRow{}, err
	}
	r := keyRow{kid: rec.KID, uri: rec.URI, alg: string(rec.Alg), jwk: string(jwk), revokeReason: rec.RevokeReason}
	if r.createdAt, err = store.Nanos(rec.CreatedAt); err != nil {
		return keyRow{}, fmt.Errorf("created_at: %w", err)
	}
	if r.publishAt, err = store.Nanos(rec.PublishAt); err != nil {
		return keyRow{}, fmt.Errorf("publish_at: %w", err)
	}
	for _, f := range []struct {
		name string
		src  *time.Time
		dst  *sql.NullInt64
	}{
		{"activate_at", rec.ActivateAt, &r.activateAt},
		{"retire_at", rec.RetireAt, &r.retireAt},
		{"expire_at", rec.ExpireAt, &r.expireAt},
		{"revoked_at", rec.RevokedAt, &r.revokedAt},
	} {
		if *f.dst, err = toNullNanos(f.src); err != nil {
			return keyRow{}, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return r, nil
}

func (r keyRow) record() (jwks.KeyRecord, error) {
	pub, err := jose.ParseJWK([]byte(r.jwk))
	if err != nil {
		return jwks.KeyRecord{}, fmt.Errorf("key %s: public key: %w", r.kid, err)
	}
	return jwks.KeyRecord{
		KID:          r.kid,
		URI:          r.uri,
		Alg:          jose.Alg(r.alg),
		Public:       pub,
		CreatedAt:    store.FromNanos(r.createdAt),
		PublishAt:    store.FromNanos(r.publishAt),
		ActivateAt:   fromNullNanos(r.activateAt),
		RetireAt:     fromNullNanos(r.retireAt),
		ExpireAt:     fromNullNanos(r.expireAt),
		RevokedAt:    fromNullNanos(r.revokedAt),
		RevokeReason: r.revokeReason,
	}, nil
}

// CreateKey stores a new key record; an existing kid, even a revoked one,
// fails with store.ErrExists.
func (s *Store) CreateKey(ctx context.Context, rec jwks.KeyRecord, check func(existing []jwks.KeyRecord) error) error {
	_, err := s.MakeKey(ctx, store.Checked(rec, check))
	return err
}

// insertKey checks rec and inserts it; a taken kid fails with
// store.ErrExists.
func insertKey(ctx context.Context, tx *sql.Tx, rec jwks.KeyRecord) error {
	r, err := encodeKey(rec)
	if err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM keys WHERE kid = ?)`, r.kid).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return store.ErrExists
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.kid, r.uri, r.alg, r.jwk, r.createdAt, r.publishAt,
		r.activateAt, r.retireAt, r.expireAt, r.revokedAt, r.revokeReason)
	return err
}

// ListKeys returns every key record, ordered by CreatedAt, then KID.
func (s *Store) ListKeys(ctx context.Context) ([]jwks.KeyRecord, error) {
	recs, err := listKeys(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("store: list keys: %w", err)
	}
	return recs, nil
}

// querier is what listKeys needs of *sql.DB and *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func listKeys(ctx context.Context, q querier) ([]jwks.KeyRecord, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+keyColumns+` FROM keys ORDER BY created_at, kid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []jwks.KeyRecord
	for rows.Next() {
		var r keyRow
		if err := rows.Scan(&r.kid, &r.uri, &r.alg, &r.jwk, &r.createdAt, &r.publishAt,
			&r.activateAt, &r.retireAt, &r.expireAt, &r.revokedAt, &r.revokeReason); err != nil {
			return nil, err
		}
		rec, err := r.record()
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	return recs, rows.Err()
}

// UpdateKeys runs fn over every key record in one write transaction and
// writes back the records it returns; see store.Store.
func (s *Store) UpdateKeys(ctx context.Context, fn func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error)) error {
	var fnErr error
	err := s.write(ctx, func(tx *sql.Tx) error {
		recs, err := listKeys(ctx, tx)
		if err != nil {
			return err
		}
		stored := slices.Clone(recs) // fn may change recs in place
		updated, err := fn(recs)
		if err != nil {
			fnErr = err
			return err
		}
		if err := store.CheckUpdates(stored, updated); err != nil {
			return err
		}
		for _, u := range updated {
			if err := updateKey(ctx, tx, u); err != nil {
				return err
			}
		}
		return nil
	})
	if fnErr != nil {
		return fnErr // as is, unwrapped: the caller's error, not the store's
	}
	if err != nil {
		return fmt.Errorf("store: update keys: %w", err)
	}
	return nil
}

// ChangeKeys runs fn over every key record in one write transaction and
// writes the change it returns, its audit records included; see
// store.Store. The transaction holds SQLite's one write lock throughout,
// whatever the mode.
func (s *Store) ChangeKeys(ctx context.Context, _ store.KeyChangeMode, fn func(ctx context.Context, recs []jwks.KeyRecord) (store.KeyChange, error)) ([]audit.Record, error) {
	return s.changeKeys(ctx, func(ctx context.Context, _ *sql.Tx, recs []jwks.KeyRecord) (store.KeyChange, error) {
		return fn(ctx, recs)
	})
}

// BaselineKeys appends a key.baseline record of every key no key
// administration record names, unless one exists; see store.Store.
func (s *Store) BaselineKeys(ctx context.Context, rec func(jwks.KeyRecord) (audit.Record, error)) ([]audit.Record, error) {
	// Looked at first without a lock, so a start whose keys all have a
	// record (every start after the first) does not hold up appends.
	baselined, audited, err := keyTrailKids(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("store: baseline keys: %w", err)
	}
	keys, err := listKeys(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("store: baseline keys: %w", err)
	}
	if !store.NeedsBaseline(keys, baselined, audited) {
		return nil, nil
	}
	return s.changeKeys(ctx, func(ctx context.Context, tx *sql.Tx, recs []jwks.KeyRecord) (store.KeyChange, error) {
		baselined, audited, err := keyTrailKids(ctx, tx)
		if err != nil {
			return store.KeyChange{}, fmt.Errorf("store: baseline keys: %w", err)
		}
		return store.BaselineChange(recs, baselined, audited, rec)
	})
}

// keyTrailKids says whether a key.baseline record exists and which kids
// key administration records name.
func keyTrailKids(ctx context.Context, q querier) (baselined bool, audited map[string]bool, err error) {
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT outcome, kid FROM audit WHERE outcome NOT IN ('signed', 'refused')`)
	if err != nil {
		return false, nil, err
	}
	defer rows.Close()
	audited = map[string]bool{}
	for rows.Next() {
		var kind, kid string
		if err := rows.Scan(&kind, &kid); err != nil {
			return false, nil, err
		}
		if audit.Kind(kind).IsKey() {
			audited[kid] = true
			baselined = baselined || audit.Kind(kind) == audit.KindKeyBaseline
		}
	}
	return baselined, audited, rows.Err()
}

// changeKeys is ChangeKeys with fn given the transaction.
func (s *Store) changeKeys(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx, recs []jwks.KeyRecord) (store.KeyChange, error)) ([]audit.Record, error) {
	var fnErr error
	var out []audit.Record
	var edge transparency.Edge
	var written []transparency.StoredHash
	err := s.writeFreeingWAL(ctx, func(tx *sql.Tx) error {
		recs, err := listKeys(ctx, tx)
		if err != nil {
			return err
		}
		stored := slices.Clone(recs) // fn may change recs in place
		ch, err := fn(ctx, tx, recs)
		if err != nil {
			fnErr = err
			return err
		}
		var times []int64
		if out, times, err = store.PrepareKeyChange(stored, ch); err != nil {
			return err
		}
		if ch.Create != nil {
			if err := insertKey(ctx, tx, *ch.Create); err != nil {
				return fmt.Errorf("key %s: %w", ch.Create.KID, err)
			}
		}
		for _, u := range ch.Update {
			if err := updateKey(ctx, tx, u); err != nil {
				return err
			}
		}
		if len(out) == 0 {
			return nil
		}
		edge, written, err = s.appendTx(ctx, tx, out, times)
		return err
	})
	if fnErr != nil {
		return nil, fnErr // as is, unwrapped: the caller's error, not the store's
	}
	if err != nil {
		return nil, fmt.Errorf("store: change keys: %w", err)
	}
	if len(out) > 0 {
		s.edge.Store(&edge)
		s.hashes.Add(written)
	}
	return out, nil
}

// updateKey writes the mutable fields of u over its stored record.
func updateKey(ctx context.Context, tx *sql.Tx, u jwks.KeyRecord) error {
	r, err := encodeKey(u)
	if err != nil {
		return fmt.Errorf("key %s: %w", u.KID, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE keys SET publish_at = ?, activate_at = ?, retire_at = ?, expire_at = ?, revoked_at = ?, revoke_reason = ? WHERE kid = ?`,
		r.publishAt, r.activateAt, r.retireAt, r.expireAt, r.revokedAt, r.revokeReason, r.kid); err != nil {
		return fmt.Errorf("key %s: %w", u.KID, err)
	}
	return nil
}
