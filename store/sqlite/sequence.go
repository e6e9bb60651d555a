package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/cardsign/cardsign/store/sqlrows"
)

// clock is the Store's part for store.Clock and store.Counters: the store's
// time and its named counters.
type clock struct{ *core }

// NextSequence returns the next value (1, 2, …) of the durable counter name.
func (s *clock) NextSequence(ctx context.Context, name string) (int64, error) {
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

// Counter returns the counter's current value (0: never used).
func (s *clock) Counter(ctx context.Context, name string) (int64, error) {
	v, err := sqlrows.Counter(ctx, rowsOf(s.db), `SELECT value FROM sequences WHERE name = ?`, name)
	if err != nil {
		return 0, fmt.Errorf("store: counter %q: %w", name, err)
	}
	return v, nil
}

// RaiseCounter sets the counter to atLeast when it is below it.
func (s *clock) RaiseCounter(ctx context.Context, name string, atLeast int64) error {
	if name == "" {
		return errors.New("store: raise counter: empty name")
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sequences (name, value) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)`, name, atLeast)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: raise counter %q: %w", name, err)
	}
	return nil
}
