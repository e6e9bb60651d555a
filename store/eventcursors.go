package store

import (
	"context"
	"time"
)

// EventCursors are the event sinks' cursors (package events): for each
// sink, the Seq of the last audit record delivered to it. Events are
// delivered from the audit log, never from memory, so a cursor is all a
// sink's delivery needs to resume after a crash or a failover. One replica
// delivers at a time (under the duties lease), and every advance is fenced
// by that lease's epoch: a former deliverer that wakes up after its lease
// lapsed cannot move a cursor its successor moved.
type EventCursors interface {
	// EventCursor returns sink's cursor, or an error wrapping ErrNotFound
	// when the sink has none yet (it never delivered).
	EventCursor(ctx context.Context, sink string) (EventCursor, error)
	// AdvanceEventCursor sets sink's cursor to seq, in a transaction that
	// checks fence is still held, unexpired, with its epoch (else
	// ErrLeaseLost) and that seq is not below the stored cursor (else
	// ErrStaleCursor); an equal seq changes nothing. UpdatedAt is the
	// store's clock.
	AdvanceEventCursor(ctx context.Context, fence Lease, sink string, seq int64) error
	// EventCursors returns every sink's cursor, ordered by sink name.
	EventCursors(ctx context.Context) ([]EventCursor, error)
}

// EventCursor is one sink's cursor.
type EventCursor struct {
	Sink      string
	Seq       int64     // the last audit record delivered; 0: none yet
	UpdatedAt time.Time // when it last moved, on the store's clock
}
