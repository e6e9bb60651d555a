package postgres

import (
	"context"
	"fmt"

	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

// cosignatures is the Store's part for store.Cosignatures: table
// log_cosignatures of migration 9.
type cosignatures struct{ *core }

// PutCosignatures stores cs in one statement, a later cosignature of a size
// by a witness replacing the earlier.
func (s *cosignatures) PutCosignatures(ctx context.Context, cs []transparency.Cosignature) error {
	if err := store.CheckCosignatures(cs); err != nil {
		return err
	}
	if len(cs) == 0 {
		return nil
	}
	sizes := make([]int64, len(cs))
	witnesses := make([]string, len(cs))
	sigs := make([]string, len(cs))
	// One row per (size, witness) in the statement: ON CONFLICT cannot
	// touch a row twice, so the last of duplicates wins here, as it would
	// one row at a time.
	seen := map[[2]string]int{}
	n := 0
	for _, c := range cs {
		k := [2]string{fmt.Sprint(c.Size), c.Witness}
		if i, ok := seen[k]; ok {
			sigs[i] = c.Signature
			continue
		}
		seen[k] = n
		sizes[n], witnesses[n], sigs[n] = c.Size, c.Witness, c.Signature
		n++
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO log_cosignatures (size, witness, signature)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])
		ON CONFLICT (size, witness) DO UPDATE SET signature = excluded.signature, stored_at = now()`,
		sizes[:n], witnesses[:n], sigs[:n])
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
	rows, err := s.pool.Query(ctx, `SELECT size, witness, signature FROM log_cosignatures WHERE size >= $1
		ORDER BY size DESC, witness COLLATE "C" LIMIT $2`, from, limit)
	if err != nil {
		return nil, fmt.Errorf("store: cosignatures from %d: %w", from, err)
	}
	defer rows.Close()
	return store.ScanCosignatures(rows)
}

// WitnessSizes returns the largest size each witness cosigned.
func (s *cosignatures) WitnessSizes(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT witness, max(size) FROM log_cosignatures GROUP BY witness`)
	if err != nil {
		return nil, fmt.Errorf("store: witness sizes: %w", err)
	}
	defer rows.Close()
	return store.ScanWitnessSizes(rows)
}

// PruneCosignatures deletes the cosignatures of sizes below below, keeping
// each witness's largest.
func (s *cosignatures) PruneCosignatures(ctx context.Context, below int64) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM log_cosignatures c WHERE c.size < $1
		AND c.size < (SELECT max(w.size) FROM log_cosignatures w WHERE w.witness = c.witness)`, below)
	if err != nil {
		return fmt.Errorf("store: prune cosignatures below %d: %w", below, err)
	}
	return nil
}
