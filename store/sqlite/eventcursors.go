package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/store"
)

// eventCursors is the Store's part for store.EventCursors.
type eventCursors struct{ *core }

// EventCursor returns sink's cursor; see store.EventCursors.
func (s *eventCursors) EventCursor(ctx context.Context, sink string) (store.EventCursor, error) {
	c := store.EventCursor{Sink: sink}
	var updated int64
	err := s.db.QueryRowContext(ctx, `SELECT seq, updated_at FROM event_cursors WHERE sink = ?`, sink).Scan(&c.Seq, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return store.EventCursor{}, fmt.Errorf("store: event cursor %q: %w", sink, store.ErrNotFound)
	}
	if err != nil {
		return store.EventCursor{}, fmt.Errorf("store: event cursor %q: %w", sink, err)
	}
	c.UpdatedAt = store.FromNanos(updated)
	return c, nil
}

// AdvanceEventCursor moves sink's cursor to seq if fence still holds;
// see store.EventCursors.
func (s *eventCursors) AdvanceEventCursor(ctx context.Context, fence store.Lease, sink string, seq int64) error {
	if sink == "" || seq < 0 {
		return fmt.Errorf("store: advance event cursor %q to %d: a sink name and a seq of 0 or more are required", sink, seq)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := time.Now().UnixNano()
		if err := holdFence(ctx, tx, fence, now); err != nil {
			return err
		}
		var stored int64
		err := tx.QueryRowContext(ctx, `SELECT seq FROM event_cursors WHERE sink = ?`, sink).Scan(&stored)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case seq < stored:
			return fmt.Errorf("%w: %d, stored %d", store.ErrStaleCursor, seq, stored)
		case seq == stored:
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO event_cursors (sink, seq, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (sink) DO UPDATE SET seq = excluded.seq, updated_at = excluded.updated_at`, sink, seq, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: advance event cursor %q to %d: %w", sink, seq, err)
	}
	return nil
}

// EventCursors returns every sink's cursor, by sink name.
func (s *eventCursors) EventCursors(ctx context.Context) ([]store.EventCursor, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT sink, seq, updated_at FROM event_cursors ORDER BY sink`)
	if err != nil {
		return nil, fmt.Errorf("store: event cursors: %w", err)
	}
	defer rows.Close()
	var out []store.EventCursor
	for rows.Next() {
		var c store.EventCursor
		var updated int64
		if err := rows.Scan(&c.Sink, &c.Seq, &updated); err != nil {
			return nil, fmt.Errorf("store: event cursors: %w", err)
		}
		c.UpdatedAt = store.FromNanos(updated)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: event cursors: %w", err)
	}
	return out, nil
}
