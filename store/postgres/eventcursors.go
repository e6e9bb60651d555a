package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cardsign/cardsign/store"
)

// eventCursors is the Store's part for store.EventCursors.
type eventCursors struct{ *core }

// EventCursor returns sink's cursor; see store.EventCursors.
func (s *eventCursors) EventCursor(ctx context.Context, sink string) (store.EventCursor, error) {
	c := store.EventCursor{Sink: sink}
	err := s.pool.QueryRow(ctx, `SELECT seq, updated_at FROM event_cursors WHERE sink = $1`, sink).Scan(&c.Seq, &c.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.EventCursor{}, fmt.Errorf("store: event cursor %q: %w", sink, store.ErrNotFound)
	}
	if err != nil {
		return store.EventCursor{}, wrap(ctx, fmt.Sprintf("event cursor %q", sink), err)
	}
	c.UpdatedAt = c.UpdatedAt.UTC()
	return c, nil
}

// AdvanceEventCursor moves sink's cursor to seq if fence still holds; see
// store.EventCursors. The fence is checked as PutDocument checks it (FOR
// SHARE on the lease row, in the writing transaction); the move is one
// upsert that never lowers the cursor.
func (s *eventCursors) AdvanceEventCursor(ctx context.Context, fence store.Lease, sink string, seq int64) error {
	op := fmt.Sprintf("advance event cursor %q to %d", sink, seq)
	if sink == "" || seq < 0 {
		return fmt.Errorf("store: %s: a sink name and a seq of 0 or more are required", op)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := holdFence(ctx, tx, fence); err != nil {
			return err
		}
		var stored int64
		err := tx.QueryRow(ctx, `INSERT INTO event_cursors AS c (sink, seq, updated_at) VALUES ($1, $2, clock_timestamp())
			ON CONFLICT (sink) DO UPDATE SET seq = EXCLUDED.seq, updated_at = EXCLUDED.updated_at
			WHERE c.seq < EXCLUDED.seq
			RETURNING seq`, sink, seq).Scan(&stored)
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// Nothing changed: the stored cursor is at seq or beyond.
		if err := tx.QueryRow(ctx, `SELECT seq FROM event_cursors WHERE sink = $1`, sink).Scan(&stored); err != nil {
			return err
		}
		if stored > seq {
			return fmt.Errorf("%w: stored %d", store.ErrStaleCursor, stored)
		}
		return nil
	})
	return wrap(ctx, op, err)
}

// EventCursors returns every sink's cursor, by sink name.
func (s *eventCursors) EventCursors(ctx context.Context) ([]store.EventCursor, error) {
	rows, err := s.pool.Query(ctx, `SELECT sink, seq, updated_at FROM event_cursors ORDER BY sink`)
	if err != nil {
		return nil, wrap(ctx, "event cursors", err)
	}
	defer rows.Close()
	var out []store.EventCursor
	for rows.Next() {
		var c store.EventCursor
		if err := rows.Scan(&c.Sink, &c.Seq, &c.UpdatedAt); err != nil {
			return nil, wrap(ctx, "event cursors", err)
		}
		c.UpdatedAt = c.UpdatedAt.UTC()
		out = append(out, c)
	}
	return out, wrap(ctx, "event cursors", rows.Err())
}
