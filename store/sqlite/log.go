package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

// logRows is the Store's part for store.Log: the transparency log's rows.
type logRows struct{ *core }

// The transparency log's storage (store.Log): tables log_entries and
// log_hashes of migration 9, appended to inside AppendAudit's transaction.

// logSize reads the log's size inside tx; the statements are prepared.
func (s *core) logSize(ctx context.Context, tx *sql.Tx) (int64, error) {
	var n int64
	if err := tx.StmtContext(ctx, s.stmts.logSize).QueryRowContext(ctx).Scan(&n); err != nil {
		return 0, fmt.Errorf("transparency log size: %w", err)
	}
	return n, nil
}

// txLog is the log's rows inside tx (transparency.Rows); the statements
// are prepared.
type txLog struct {
	s  *core
	tx *sql.Tx
}

// ReadHashes reads stored tree hashes inside tx.
func (t txLog) ReadHashes(ctx context.Context, indexes []int64) ([]transparency.Hash, error) {
	stmt := t.tx.StmtContext(ctx, t.s.stmts.logHashes)
	defer stmt.Close()
	return readLogHashes(indexes, func(arg string) (*sql.Rows, error) { return stmt.QueryContext(ctx, arg) })
}

// WriteLeaves inserts leaves first, first+1, ... and the tree hashes they
// add inside tx, logRowsPerInsert rows per statement and the rest one at a
// time. (One statement for all, json_each over the rows, cost more with
// this driver, for one leaf and for 64.)
func (t txLog) WriteLeaves(ctx context.Context, first int64, entries [][]byte, hashes []transparency.StoredHash) error {
	err := insertRows(ctx, t.tx, t.s.stmts.logEntries, t.s.stmts.logEntry, len(entries), func(i int) (int64, []byte) {
		return first + int64(i), entries[i]
	})
	if err != nil {
		return fmt.Errorf("transparency log: leaves from %d: %w", first, err)
	}
	err = insertRows(ctx, t.tx, t.s.stmts.logHashRows, t.s.stmts.logHash, len(hashes), func(i int) (int64, []byte) {
		return hashes[i].Index, hashes[i].Hash[:]
	})
	if err != nil {
		return fmt.Errorf("transparency log: tree hashes: %w", err)
	}
	return nil
}

// insertRows inserts n rows of (idx, blob), row(i) giving row i, with
// many (logRowsPerInsert rows) while they fill it and then one (a row).
func insertRows(ctx context.Context, tx *sql.Tx, many, one *sql.Stmt, n int, row func(i int) (int64, []byte)) error {
	args := make([]any, 0, 2*logRowsPerInsert)
	i := 0
	if n >= logRowsPerInsert {
		stmt := tx.StmtContext(ctx, many)
		defer stmt.Close()
		for ; i+logRowsPerInsert <= n; i += logRowsPerInsert {
			args = args[:0]
			for k := i; k < i+logRowsPerInsert; k++ {
				idx, b := row(k)
				args = append(args, idx, b)
			}
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("rows %d to %d: %w", args[0], args[len(args)-2], err)
			}
		}
	}
	if i == n {
		return nil
	}
	stmt := tx.StmtContext(ctx, one)
	defer stmt.Close()
	for ; i < n; i++ {
		idx, b := row(i)
		if _, err := stmt.ExecContext(ctx, idx, b); err != nil {
			return fmt.Errorf("row %d: %w", idx, err)
		}
	}
	return nil
}

// catchUpLog makes every audit record a leaf of the transparency log: the
// records appended before the log existed (migration 9) get theirs when the
// store opens, transparency.CatchUpChunk per transaction. Each is a write
// transaction (BEGIN IMMEDIATE, as appends) that reads the log's size and
// the audit head again, so processes opening the file at once append each
// leaf once and no append runs between two chunks of one.
func (s *core) catchUpLog(ctx context.Context) error {
	// A read first: a caught-up log costs an open no write lock.
	head, _, err := (&auditTrail{s}).AuditHead(ctx)
	if err != nil {
		return err
	}
	var size int64
	if err := s.db.QueryRowContext(ctx, selectLogSize).Scan(&size); err != nil {
		return fmt.Errorf("transparency log size: %w", err)
	}
	return transparency.CatchUp(ctx, s.log, size, head, func(ctx context.Context) (int64, int64, error) {
		err := s.writeFreeingWAL(ctx, func(tx *sql.Tx) error {
			if err := s.prepare(ctx); err != nil {
				return err
			}
			var err error
			if head, _, err = scanHead(tx.StmtContext(ctx, s.stmts.head).QueryRowContext(ctx)); err != nil {
				return err
			}
			if size, err = s.logSize(ctx, tx); err != nil || size == head {
				return err
			}
			size, err = s.catchUpChunk(ctx, tx, size, head)
			return err
		})
		return size, head, err
	})
}

// catchUpChunk makes up to transparency.CatchUpChunk records after the log's
// size leaves inside tx, a write transaction, and returns the log's new size.
func (s *core) catchUpChunk(ctx context.Context, tx *sql.Tx, size, head int64) (int64, error) {
	recs, err := listAudit(ctx, tx, size, transparency.CatchUpChunk)
	if err != nil {
		return size, fmt.Errorf("list audit after %d: %w", size, err)
	}
	return transparency.CatchUpStep(ctx, txLog{s, tx}, size, head, recs)
}

// LogHashes returns the tree hashes stored at indexes, in the order asked.
func (s *logRows) LogHashes(ctx context.Context, indexes []int64) ([]transparency.Hash, error) {
	hs, err := s.tail.ReadHashes(ctx, indexes, func(ctx context.Context, missing []int64) ([]transparency.Hash, error) {
		return readLogHashes(missing, func(arg string) (*sql.Rows, error) {
			return s.db.QueryContext(ctx, selectLogHashes, arg)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return hs, nil
}

// LogEntries returns the encoded entries of leaves from to to-1.
func (s *logRows) LogEntries(ctx context.Context, from, to int64) ([][]byte, error) {
	if err := store.CheckLogRange(from, to); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	found, err := scanLogRows(s.db.QueryContext(ctx, `SELECT idx, entry FROM log_entries WHERE idx >= ? AND idx < ?`, from, to))
	if err != nil {
		return nil, fmt.Errorf("store: transparency log: leaves %d to %d: %w", from, to-1, err)
	}
	entries, err := store.LogEntriesFound(from, to, found)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return entries, nil
}

// readLogHashes reads the hashes at indexes with selectLogHashes, which
// query runs with the indexes as a JSON array.
func readLogHashes(indexes []int64, query func(arg string) (*sql.Rows, error)) ([]transparency.Hash, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	arg := make([]byte, 0, 2+len(indexes)*8)
	arg = append(arg, '[')
	for k, i := range indexes {
		if k > 0 {
			arg = append(arg, ',')
		}
		arg = strconv.AppendInt(arg, i, 10)
	}
	arg = append(arg, ']')
	found, err := scanLogRows(query(string(arg)))
	if err != nil {
		return nil, fmt.Errorf("transparency log: read tree hashes: %w", err)
	}
	return store.LogHashesFound(indexes, found)
}

// scanLogRows reads the rows of a query for entries or hashes.
func scanLogRows(rows *sql.Rows, err error) (map[int64][]byte, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ScanLogRows(rows)
}
