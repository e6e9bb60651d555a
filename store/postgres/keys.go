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
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlrows"
	"github.com/cardsign/cardsign/transparency"
)

// keys is the Store's part for store.Keys: the key records and their changes.
type keys struct{ *core }

// encodeKey checks rec can be stored and read back unchanged, and converts
// it.
func encodeKey(rec jwks.KeyRecord) (sqlrows.Key, error) {
	k, err := sqlrows.EncodeKey(rec)
	if err != nil {
		return sqlrows.Key{}, err
	}
	// PostgreSQL text holds no NUL byte; refuse it here with a clear
	// message rather than as an encoding error from the server.
	for _, s := range []string{k.KID, k.URI, k.RevokeReason} {
		if strings.IndexByte(s, 0) >= 0 {
			return sqlrows.Key{}, errors.New("a kid, uri or revoke reason holds a NUL byte")
		}
	}
	return k, nil
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
func insertKey(ctx context.Context, tx pgx.Tx, k sqlrows.Key) error {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM keys WHERE kid = $1)`, k.KID).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return store.ErrExists
	}
	_, err := tx.Exec(ctx, `INSERT INTO keys (`+sqlrows.KeyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, k.Args()...)
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
func (s *keys) CreateKey(ctx context.Context, rec jwks.KeyRecord, check func(existing []jwks.KeyRecord) error) error {
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
func (s *keys) MakeKey(ctx context.Context, make func(ctx context.Context, existing []jwks.KeyRecord) (jwks.KeyRecord, error)) (jwks.KeyRecord, error) {
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
func (s *keys) ListKeys(ctx context.Context) ([]jwks.KeyRecord, error) {
	recs, err := listKeys(ctx, s.pool)
	if err != nil {
		return nil, wrap(ctx, "list keys", err)
	}
	return recs, nil
}

// listKeysSQL orders kids bytewise (COLLATE "C"), as SQLite and Go do,
// whatever the database's collation.
const listKeysSQL = `SELECT ` + sqlrows.KeyColumns + ` FROM keys ORDER BY created_at, kid COLLATE "C"`

func listKeys(ctx context.Context, q querier) ([]jwks.KeyRecord, error) {
	return sqlrows.ListKeys(ctx, rowsOf(q), listKeysSQL)
}

// UpdateKeys runs fn over every key record under the key-set lock and
// writes back the records it returns; see store.Store.
func (s *keys) UpdateKeys(ctx context.Context, fn func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error)) error {
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
		if err := lockAuditHead(ctx, tx); err != nil {
			return err
		}
		updated, err := sqlrows.PrepareKeyUpdate(ctx, rowsOf(tx), listKeysSQL, fn, &fnErr)
		if err != nil {
			return err
		}
		return updateKeys(ctx, tx, updated)
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
func (s *keys) ChangeKeys(ctx context.Context, mode store.KeyChangeMode, fn func(ctx context.Context, recs []jwks.KeyRecord) (store.KeyChange, error)) ([]audit.Record, error) {
	return s.changeKeys(ctx, mode, func(ctx context.Context, _ sqlrows.Querier, recs []jwks.KeyRecord) (store.KeyChange, error) {
		return fn(ctx, recs)
	})
}

// BaselineKeys appends a key.baseline record of every key no key
// administration record names, unless one exists; see store.Store. It runs
// under a KeyTransition's locks (key set, then audit head), so replicas
// starting together append one baseline.
func (s *keys) BaselineKeys(ctx context.Context, rec func(jwks.KeyRecord) (audit.Record, error)) ([]audit.Record, error) {
	return sqlrows.BaselineKeys(ctx, rowsOf(s.pool), listKeysSQL, func(ctx context.Context, fn sqlrows.KeyChangeFunc) ([]audit.Record, error) {
		return s.changeKeys(ctx, store.KeyTransition, fn)
	}, rec)
}

// changeKeys is ChangeKeys with fn given the transaction.
func (s *keys) changeKeys(ctx context.Context, mode store.KeyChangeMode, fn sqlrows.KeyChangeFunc) ([]audit.Record, error) {
	var fnErr error
	var out []audit.Record
	var app transparency.Appended
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKeySet(ctx, tx); err != nil {
			return err
		}
		// A transition: before fn takes its time, as in UpdateKeys, so
		// every record committed before the change has an earlier time. A
		// creation: after fn, so appends do not wait for a backend.
		if mode == store.KeyTransition {
			if err := lockAuditHead(ctx, tx); err != nil {
				return err
			}
		}
		ch, err := sqlrows.PrepareKeyChange(ctx, rowsOf(tx), listKeysSQL, fn, &fnErr)
		if err != nil {
			return err
		}
		out = ch.Records
		for i, r := range out {
			if err := checkText(r); err != nil {
				return fmt.Errorf("audit record %d: %w", i, err)
			}
		}
		if mode != store.KeyTransition {
			if err := lockAuditHead(ctx, tx); err != nil {
				return err
			}
		}
		if ch.Create != nil {
			k, err := encodeKey(*ch.Create)
			if err != nil {
				return fmt.Errorf("key %s: %w", ch.Create.KID, err)
			}
			if err := insertKey(ctx, tx, k); err != nil {
				return fmt.Errorf("key %s: %w", ch.Create.KID, err)
			}
		}
		if err := updateKeys(ctx, tx, ch.Update); err != nil {
			return err
		}
		if len(out) == 0 {
			return nil
		}
		app, err = s.appendTx(ctx, tx, out, ch.Times, nil)
		return err
	})
	if fnErr != nil {
		return nil, fnErr // as is, unwrapped: the caller's error, not the store's
	}
	if err != nil {
		return nil, wrap(ctx, "change keys", err)
	}
	s.tail.Committed(app)
	return out, nil
}

// lockAuditHead takes the audit head's row lock, which every append waits
// for, until the transaction ends.
func lockAuditHead(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM audit_head WHERE id = 1 FOR UPDATE`); err != nil {
		return fmt.Errorf("audit head lock: %w", err)
	}
	return nil
}

// updateKeys writes the mutable fields of updated over the stored records,
// in one batch, and announces the change. Row locks are taken in kid
// order, the order AppendAudit takes its FOR SHARE locks on the same rows,
// so the two never wait for each other in a cycle.
func updateKeys(ctx context.Context, tx pgx.Tx, updated []jwks.KeyRecord) error {
	rows := make([]sqlrows.Key, 0, len(updated))
	for _, u := range updated {
		k, err := encodeKey(u)
		if err != nil {
			return fmt.Errorf("key %s: %w", u.KID, err)
		}
		rows = append(rows, k)
	}
	if len(rows) == 0 {
		return nil
	}
	slices.SortFunc(rows, func(a, b sqlrows.Key) int { return strings.Compare(a.KID, b.KID) })
	b := &pgx.Batch{}
	for _, k := range rows {
		b.Queue(`UPDATE keys SET publish_at = $1, activate_at = $2, retire_at = $3, expire_at = $4, revoked_at = $5, revoke_reason = $6 WHERE kid = $7`,
			k.UpdateArgs()...)
	}
	b.Queue(`SELECT pg_notify('cardsign', $1)`, store.TopicKeys)
	return tx.SendBatch(ctx, b).Close()
}
