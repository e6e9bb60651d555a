package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

const keyColumns = `kid, uri, alg, public_jwk, created_at, publish_at, activate_at, retire_at, expire_at, revoked_at, revoke_reason`

// Times are stored as BIGINT unix nanoseconds UTC (store.Nanos), as in the
// SQLite store; these are the nullable columns' forms.

func toNullNanos(t *time.Time) (*int64, error) {
	if t == nil {
		return nil, nil
	}
	n, err := store.Nanos(*t)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

func fromNullNanos(n *int64) *time.Time {
	if n == nil {
		return nil
	}
	t := store.FromNanos(*n)
	return &t
}

// keyRow is a KeyRecord in column form.
type keyRow struct {
	kid, uri, alg, jwk                        string
	createdAt, publishAt                      int64
	activateAt, retireAt, expireAt, revokedAt *int64
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
		dst  **int64
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
	// PostgreSQL text holds no NUL byte; refuse it here with a clear
	// message rather than as an encoding error from the server.
	for _, s := range []string{r.kid, r.uri, r.revokeReason} {
		if strings.IndexByte(s, 0) >= 0 {
			return keyRow{}, errors.New("a kid, uri or revoke reason holds a NUL byte")
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

// lockKeySet takes the key-set lock: the one row of keyset_lock, FOR UPDATE,
// held until the transaction ends. Every key-set change takes it before
// reading the keys, so they run one at a time across every replica.
func lockKeySet(ctx context.Context, tx pgx.Tx) error {
	var id int
	err := tx.QueryRow(ctx, `SELECT id FROM keyset_lock WHERE id = 1 FOR UPDATE`).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return errors.New("the keyset_lock row is missing: the database was edited outside cardsign; " +
			"restore it with INSERT INTO keyset_lock (id) VALUES (1)")
	}
	if err != nil {
		return fmt.Errorf("key-set lock: %w", err)
	}
	return nil
}

// insertKey inserts r; a taken kid fails with store.ErrExists. The caller
// holds the key-set lock, so the check and the insert cannot interleave with
// another writer; the primary key would catch it anyway.
func insertKey(ctx context.Context, tx pgx.Tx, r keyRow) error {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM keys WHERE kid = $1)`, r.kid).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return store.ErrExists
	}
	_, err := tx.Exec(ctx, `INSERT INTO keys (`+keyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		r.kid, r.uri, r.alg, r.jwk, r.createdAt, r.publishAt,
		r.activateAt, r.retireAt, r.expireAt, r.revokedAt, r.revokeReason)
	if isUniqueViolation(err, "keys_pkey") {
		return store.ErrExists
	}
	if err != nil {
		return err
	}
	return notify(ctx, tx, store.TopicKeys)
}

// CreateKey stores a new key record; an existing kid, even a revoked one,
// fails with store.ErrExists. check sees every record under the key-set
// lock.
func (s *Store) CreateKey(ctx context.Context, rec jwks.KeyRecord, check func(existing []jwks.KeyRecord) error) error {
	r, err := encodeKey(rec)
	if err != nil {
		return fmt.Errorf("store: create key %s: %w", rec.KID, err)
	}
	var checkErr error
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKeySet(ctx, tx); err != nil {
			return err
		}
		if check != nil {
			existing, err := listKeys(ctx, tx)
			if err != nil {
				return err
			}
			if err := check(existing); err != nil {
				checkErr = err
				return err
			}
		}
		return insertKey(ctx, tx, r)
	})
	if checkErr != nil {
		return checkErr // as is: the caller's refusal, not the store's
	}
	return wrap(ctx, "create key "+rec.KID, err)
}

// MakeKey runs make under the key-set lock, after reading every record, and
// stores the record it returns; see store.Store. Two replicas rotating at
// once run make one after the other, and the second sees the first's key.
func (s *Store) MakeKey(ctx context.Context, make func(ctx context.Context, existing []jwks.KeyRecord) (jwks.KeyRecord, error)) (jwks.KeyRecord, error) {
	var made jwks.KeyRecord
	var makeErr error
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKeySet(ctx, tx); err != nil {
			return err
		}
		existing, err := listKeys(ctx, tx)
		if err != nil {
			return err
		}
		if made, err = make(ctx, existing); err != nil {
			makeErr = err
			return err
		}
		r, err := encodeKey(made)
		if err != nil {
			return fmt.Errorf("made key %s: %w", made.KID, err)
		}
		return insertKey(ctx, tx, r)
	})
	if makeErr != nil {
		return jwks.KeyRecord{}, makeErr // as is: the caller's refusal
	}
	if err != nil {
		return jwks.KeyRecord{}, wrap(ctx, "make key", err)
	}
	return normalizeKey(made), nil
}

// normalizeKey returns rec as ListKeys would read it back: times in UTC.
func normalizeKey(rec jwks.KeyRecord) jwks.KeyRecord {
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	rec.CreatedAt, rec.PublishAt = rec.CreatedAt.UTC(), rec.PublishAt.UTC()
	rec.ActivateAt, rec.RetireAt, rec.ExpireAt, rec.RevokedAt = utc(rec.ActivateAt), utc(rec.RetireAt), utc(rec.ExpireAt), utc(rec.RevokedAt)
	return rec
}

// ListKeys returns every key record, ordered by CreatedAt, then KID.
func (s *Store) ListKeys(ctx context.Context) ([]jwks.KeyRecord, error) {
	recs, err := listKeys(ctx, s.pool)
	if err != nil {
		return nil, wrap(ctx, "list keys", err)
	}
	return recs, nil
}

// querier is what listKeys needs of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// listKeys orders kids bytewise (COLLATE "C"), as SQLite and Go do, whatever
// the database's collation.
func listKeys(ctx context.Context, q querier) ([]jwks.KeyRecord, error) {
	rows, err := q.Query(ctx, `SELECT `+keyColumns+` FROM keys ORDER BY created_at, kid COLLATE "C"`)
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

// UpdateKeys runs fn over every key record under the key-set lock and
// writes back the records it returns; see store.Store.
func (s *Store) UpdateKeys(ctx context.Context, fn func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error)) error {
	var fnErr error
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKeySet(ctx, tx); err != nil {
			return err
		}
		// The audit head too, before fn takes its time (a revocation's
		// revoked_at): appends wait, so every record committed before the
		// change has an earlier time, as on SQLite, where one write lock
		// covers both. The order (key set, audit head, key rows) never
		// reverses that of an append (audit head, key rows).
		if _, err := tx.Exec(ctx, `SELECT 1 FROM audit_head WHERE id = 1 FOR UPDATE`); err != nil {
			return fmt.Errorf("audit head lock: %w", err)
		}
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
		rows := make([]keyRow, 0, len(updated))
		for _, u := range updated {
			r, err := encodeKey(u)
			if err != nil {
				return fmt.Errorf("key %s: %w", u.KID, err)
			}
			rows = append(rows, r)
		}
		if len(rows) == 0 {
			return nil
		}
		// Row locks in kid order, the order AppendAudit takes its FOR SHARE
		// locks on the same rows, so the two never wait for each other in
		// a cycle.
		slices.SortFunc(rows, func(a, b keyRow) int { return strings.Compare(a.kid, b.kid) })
		b := &pgx.Batch{}
		for _, r := range rows {
			b.Queue(`UPDATE keys SET publish_at = $1, activate_at = $2, retire_at = $3, expire_at = $4, revoked_at = $5, revoke_reason = $6 WHERE kid = $7`,
				r.publishAt, r.activateAt, r.retireAt, r.expireAt, r.revokedAt, r.revokeReason, r.kid)
		}
		b.Queue(`SELECT pg_notify('cardsign', $1)`, store.TopicKeys)
		return tx.SendBatch(ctx, b).Close()
	})
	if fnErr != nil {
		return fnErr // as is, unwrapped: the caller's error, not the store's
	}
	return wrap(ctx, "update keys", err)
}

// ChangeKeys runs fn over every key record under the key-set lock (and,
// for a store.KeyTransition, the audit head's), and writes the change it
// returns, its audit records included; see store.Store. The locks are
// taken in UpdateKeys' order (key set, audit head, key rows) in either
// mode: a creation locks the head after fn, before it writes a row.
func (s *Store) ChangeKeys(ctx context.Context, mode store.KeyChangeMode, fn func(ctx context.Context, recs []jwks.KeyRecord) (store.KeyChange, error)) ([]audit.Record, error) {
	return s.changeKeys(ctx, mode, func(ctx context.Context, _ pgx.Tx, recs []jwks.KeyRecord) (store.KeyChange, error) {
		return fn(ctx, recs)
	})
}

// BaselineKeys appends a key.baseline record of every key no key
// administration record names, unless one exists; see store.Store. It runs
// under a KeyTransition's locks (key set, then audit head), so replicas
// starting together append one baseline.
func (s *Store) BaselineKeys(ctx context.Context, rec func(jwks.KeyRecord) (audit.Record, error)) ([]audit.Record, error) {
	// Looked at first without a lock, so a start whose keys all have a
	// record (every start after the first) does not hold up appends.
	baselined, audited, err := keyTrailKids(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("store: baseline keys: %w", err)
	}
	keys, err := listKeys(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("store: baseline keys: %w", err)
	}
	if !store.NeedsBaseline(keys, baselined, audited) {
		return nil, nil
	}
	return s.changeKeys(ctx, store.KeyTransition, func(ctx context.Context, tx pgx.Tx, recs []jwks.KeyRecord) (store.KeyChange, error) {
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
	rows, err := q.Query(ctx, `SELECT DISTINCT outcome, kid FROM audit WHERE outcome NOT IN ('signed', 'refused')`)
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
func (s *Store) changeKeys(ctx context.Context, mode store.KeyChangeMode, fn func(ctx context.Context, tx pgx.Tx, recs []jwks.KeyRecord) (store.KeyChange, error)) ([]audit.Record, error) {
	var fnErr error
	var out []audit.Record
	var edge transparency.Edge
	var written []transparency.StoredHash
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKeySet(ctx, tx); err != nil {
			return err
		}
		lockHead := func() error {
			if _, err := tx.Exec(ctx, `SELECT 1 FROM audit_head WHERE id = 1 FOR UPDATE`); err != nil {
				return fmt.Errorf("audit head lock: %w", err)
			}
			return nil
		}
		// A transition: before fn takes its time, as in UpdateKeys, so
		// every record committed before the change has an earlier time. A
		// creation: after fn, so appends do not wait for a backend.
		if mode == store.KeyTransition {
			if err := lockHead(); err != nil {
				return err
			}
		}
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
		for i, r := range out {
			if err := checkText(r); err != nil {
				return fmt.Errorf("audit record %d: %w", i, err)
			}
		}
		if mode != store.KeyTransition {
			if err := lockHead(); err != nil {
				return err
			}
		}
		if ch.Create != nil {
			r, err := encodeKey(*ch.Create)
			if err != nil {
				return fmt.Errorf("key %s: %w", ch.Create.KID, err)
			}
			if err := insertKey(ctx, tx, r); err != nil {
				return fmt.Errorf("key %s: %w", ch.Create.KID, err)
			}
		}
		rows := make([]keyRow, 0, len(ch.Update))
		for _, u := range ch.Update {
			r, err := encodeKey(u)
			if err != nil {
				return fmt.Errorf("key %s: %w", u.KID, err)
			}
			rows = append(rows, r)
		}
		if len(rows) > 0 {
			slices.SortFunc(rows, func(a, b keyRow) int { return strings.Compare(a.kid, b.kid) })
			b := &pgx.Batch{}
			for _, r := range rows {
				b.Queue(`UPDATE keys SET publish_at = $1, activate_at = $2, retire_at = $3, expire_at = $4, revoked_at = $5, revoke_reason = $6 WHERE kid = $7`,
					r.publishAt, r.activateAt, r.retireAt, r.expireAt, r.revokedAt, r.revokeReason, r.kid)
			}
			b.Queue(`SELECT pg_notify('cardsign', $1)`, store.TopicKeys)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
		}
		if len(out) == 0 {
			return nil
		}
		edge, written, err = s.appendTx(ctx, tx, out, times, nil)
		return err
	})
	if fnErr != nil {
		return nil, fnErr // as is, unwrapped: the caller's error, not the store's
	}
	if err != nil {
		return nil, wrap(ctx, "change keys", err)
	}
	if len(out) > 0 {
		s.edge.Store(&edge)
		s.hashes.Add(written)
	}
	return out, nil
}
