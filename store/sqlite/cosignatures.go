package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

// cosignatures is the Store's part for store.Cosignatures: table
// log_cosignatures of migration 12.
type cosignatures struct{ *core }

// PutCosignatures stores cs in one transaction, a later cosignature of a
// size by a witness replacing the earlier.
func (s *cosignatures) PutCosignatures(ctx context.Context, cs []transparency.Cosignature) error {
	if err := store.CheckCosignatures(cs); err != nil {
		return err
	}
	if len(cs) == 0 {
		return nil
	}
	now := time.Now().UnixNano()
	err := s.write(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO log_cosignatures (size, witness, signature, stored_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (size, witness) DO UPDATE SET signature = excluded.signature, stored_at = excluded.stored_at`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, c := range cs {
			if _, err := stmt.ExecContext(ctx, c.Size, c.Witness, c.Signature, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: put %d cosignatures: %w", len(cs), err)
	}
	return nil
}

// Cosignatures returns the cosignatures of sizes from and up, largest size
// first, at most limit.
func (s *cosignatures) Cosignatures(ctx context.Context, from int64, limit int) ([]transparency.Cosignature, error) {
	if err := store.CheckCosignaturesRange(from, limit); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT size, witness, signature FROM log_cosignatures WHERE size >= ?
		ORDER BY size DESC, witness LIMIT ?`, from, limit)
	if err != nil {
		return nil, fmt.Errorf("store: cosignatures from %d: %w", from, err)
	}
	defer rows.Close()
	return store.ScanCosignatures(rows)
}

// WitnessSizes returns the largest size each witness cosigned.
func (s *cosignatures) WitnessSizes(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT witness, max(size) FROM log_cosignatures GROUP BY witness`)
	if err != nil {
		return nil, fmt.Errorf("store: witness sizes: %w", err)
	}
	defer rows.Close()
	return store.ScanWitnessSizes(rows)
}

// PruneCosignatures deletes the cosignatures of sizes below below, keeping
// each witness's largest.
func (s *cosignatures) PruneCosignatures(ctx context.Context, below int64) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM log_cosignatures WHERE size < ?
			AND size < (SELECT max(size) FROM log_cosignatures AS w WHERE w.witness = log_cosignatures.witness)`, below)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: prune cosignatures below %d: %w", below, err)
	}
	return nil
}
