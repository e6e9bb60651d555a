package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cardsign/cardsign/store"
	"modernc.org/sqlite"
)

// sqliteFull is SQLITE_FULL, the primary result code of a write that found
// no space ("database or disk is full").
const sqliteFull = 13

// errCheckpointBusy: another connection (a reader in another process) kept
// the checkpoint from completing; the WAL was not truncated.
var errCheckpointBusy = errors.New("WAL checkpoint did not complete: another connection is reading or writing")

// Checkpoint copies every WAL frame into the database file and truncates the
// WAL to zero bytes (PRAGMA wal_checkpoint(TRUNCATE)). SQLite's automatic
// checkpoints never shrink the WAL file, and cannot run past a reader, so on
// a small volume a WAL grown once keeps its space until this runs.
func (s *core) Checkpoint(ctx context.Context) error {
	// Our own writers wait in Go rather than in SQLite's busy handler.
	select {
	case s.writeSlot <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.writeSlot }()
	return s.checkpoint(ctx)
}

func (s *core) checkpoint(ctx context.Context) error {
	var busy, frames, done int
	if err := s.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done); err != nil {
		return fmt.Errorf("checkpoint WAL: %w", err)
	}
	if busy != 0 {
		return fmt.Errorf("checkpoint WAL (%d of %d frames copied): %w", done, frames, errCheckpointBusy)
	}
	return nil
}

// checkpointAtOpen checkpoints before the store is used. Another process
// reading or writing the database is not an error (its own checkpoints will
// catch up), and is not waited for: a TRUNCATE checkpoint holds the writer
// lock while it waits for readers, so several processes opening one file at
// once, each checkpointing with the busy timeout, kept each other waiting
// past it. No space to checkpoint into is an error, naming the volume to
// free.
func (s *core) checkpointAtOpen(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return err
	}
	var busy, frames, done int
	err = conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done)
	// The connection goes back to the pool: restore what dsnParams set.
	if _, rerr := conn.ExecContext(ctx, "PRAGMA busy_timeout = 5000"); rerr != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // drop it rather than pool it without a timeout
		if err == nil {
			return rerr
		}
	}
	switch {
	case err == nil, isBusy(err):
		return nil
	case isFull(err):
		return fmt.Errorf("checkpoint WAL: %w: no space to checkpoint the WAL; free space on the volume holding %s", err, filepath.Dir(s.path))
	}
	return fmt.Errorf("checkpoint WAL: %w", err)
}

// writeFreeingWAL is write, except that a write failing for lack of space
// checkpoints and truncates the WAL, which gives back the space of frames
// already in the database, and is tried once more. A write that still
// fails says which volume needs space.
func (s *core) writeFreeingWAL(ctx context.Context, fn func(tx *sql.Tx) error) error {
	err := s.write(ctx, fn)
	if !isFull(err) {
		return err
	}
	if cerr := s.Checkpoint(ctx); cerr == nil {
		s.full.Store(false)
	} else {
		return fmt.Errorf("%w (no space left, and truncating the WAL failed: %v); free space on the volume holding %s", err, cerr, filepath.Dir(s.path))
	}
	if err := s.write(ctx, fn); err != nil {
		if isFull(err) {
			return fmt.Errorf("%w (no space left even after truncating the WAL); free space on the volume holding %s", err, filepath.Dir(s.path))
		}
		return err
	}
	return nil
}

// isFull reports whether err is SQLITE_FULL or ENOSPC.
func isFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, store.ErrFull) {
		return true
	}
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqliteFull {
		return true
	}
	return errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "SQLITE_FULL")
}
