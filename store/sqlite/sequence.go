package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// NextSequence returns the next value (1, 2, …) of the durable counter name.
func (s *Store) NextSequence(ctx context.Context, name string) (int64, error) {
	if name == "" {
		return 0, errors.New("store: next sequence: empty name")
	}
	var v int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO sequences (name, value) VALUES (?, 1)
			ON CONFLICT (name) DO UPDATE SET value = value + 1
			RETURNING value`, name).Scan(&v)
	})
	if err != nil {
		return 0, fmt.Errorf("store: next sequence %q: %w", name, err)
	}
	return v, nil
}
