package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlrows"
)

// keys is the Store's part for store.Keys: the key records and their changes.
type keys struct{ *core }

// CreateKey stores a new key record; an existing kid, even a revoked one,
// fails with store.ErrExists.
func (s *keys) CreateKey(ctx context.Context, rec jwks.KeyRecord, check func(existing []jwks.KeyRecord) error) error {
	_, err := s.MakeKey(ctx, store.Checked(rec, check))
	return err
}

// insertKey checks rec and inserts it; a taken kid fails with
// store.ErrExists.
func insertKey(ctx context.Context, tx *sql.Tx, rec jwks.KeyRecord) error {
	k, err := sqlrows.EncodeKey(rec)
	if err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM keys WHERE kid = ?)`, k.KID).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return store.ErrExists
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO keys (`+sqlrows.KeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, k.Args()...)
	return err
}

// ListKeys returns every key record, ordered by CreatedAt, then KID.
func (s *keys) ListKeys(ctx context.Context) ([]jwks.KeyRecord, error) {
	recs, err := listKeys(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("store: list keys: %w", err)
	}
	return recs, nil
}

// listKeysSQL orders by CreatedAt, then KID: SQLite compares text
// bytewise, as Go does.
const listKeysSQL = `SELECT ` + sqlrows.KeyColumns + ` FROM keys ORDER BY created_at, kid`

func listKeys(ctx context.Context, q querier) ([]jwks.KeyRecord, error) {
	return sqlrows.ListKeys(ctx, rowsOf(q), listKeysSQL)
}

// UpdateKeys runs fn over every key record in one write transaction and
// writes back the records it returns; see store.Store.
func (s *keys) UpdateKeys(ctx context.Context, fn func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error)) error {
	var fnErr error
	err := s.write(ctx, func(tx *sql.Tx) error {
		updated, err := sqlrows.PrepareKeyUpdate(ctx, rowsOf(tx), listKeysSQL, fn, &fnErr)
		if err != nil {
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
func (s *keys) ChangeKeys(ctx context.Context, _ store.KeyChangeMode, fn func(ctx context.Context, recs []jwks.KeyRecord) (store.KeyChange, error)) ([]audit.Record, error) {
	return s.changeKeys(ctx, func(ctx context.Context, _ sqlrows.Querier, recs []jwks.KeyRecord) (store.KeyChange, error) {
		return fn(ctx, recs)
	})
}

// BaselineKeys appends a key.baseline record of every key no key
// administration record names, unless one exists; see store.Store.
func (s *keys) BaselineKeys(ctx context.Context, rec func(jwks.KeyRecord) (audit.Record, error)) ([]audit.Record, error) {
	return sqlrows.BaselineKeys(ctx, rowsOf(s.db), listKeysSQL, s.changeKeys, rec)
}

// changeKeys is ChangeKeys with fn given the transaction.
func (s *keys) changeKeys(ctx context.Context, fn sqlrows.KeyChangeFunc) ([]audit.Record, error) {
	var fnErr error
	var out []audit.Record
	err := s.writeFreeingWAL(ctx, func(tx *sql.Tx) error {
		ch, err := sqlrows.PrepareKeyChange(ctx, rowsOf(tx), listKeysSQL, fn, &fnErr)
		if err != nil {
			return err
		}
		out = ch.Records
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
		err = s.appendTx(ctx, tx, out, ch.Times)
		return err
	})
	if fnErr != nil {
		return nil, fnErr // as is, unwrapped: the caller's error, not the store's
	}
	if err != nil {
		return nil, fmt.Errorf("store: change keys: %w", err)
	}
	return out, nil
}

// updateKey writes the mutable fields of u over its stored record.
func updateKey(ctx context.Context, tx *sql.Tx, u jwks.KeyRecord) error {
	k, err := sqlrows.EncodeKey(u)
	if err != nil {
		return fmt.Errorf("key %s: %w", u.KID, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE keys SET publish_at = ?, activate_at = ?, retire_at = ?, expire_at = ?, revoked_at = ?, revoke_reason = ? WHERE kid = ?`,
		k.UpdateArgs()...); err != nil {
		return fmt.Errorf("key %s: %w", u.KID, err)
	}
	return nil
}
