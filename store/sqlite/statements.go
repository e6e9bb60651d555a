package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// The SQL of the audit append path, the store's hot path.
const (
	selectHead      = `SELECT seq, hash FROM audit_head WHERE id = 1`
	selectRevokedAt = `SELECT revoked_at FROM keys WHERE kid = ?`
	insertAudit     = `INSERT INTO audit (` + auditAllColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// The transparency log's size: its last leaf's index + 1. Appends add
	// leaves at the next index only; a row inserted behind the store's back
	// makes this disagree with the audit head, and appends refuse.
	selectLogSize = `SELECT coalesce(max(idx) + 1, 0) FROM log_entries`
	// Tree hashes by storage index, the indexes as one JSON array: one
	// statement, prepared once, whatever the number of indexes.
	selectLogHashes = `SELECT idx, hash FROM log_hashes WHERE idx IN (SELECT value FROM json_each(?))`
	insertLogEntry  = `INSERT INTO log_entries (idx, entry) VALUES (?, ?)`
	insertLogHash   = `INSERT INTO log_hashes (idx, hash) VALUES (?, ?)`
)

// logRowsPerInsert and auditRowsPerInsert are how many rows one
// multi-row INSERT writes: a transaction of N records writes N audit rows,
// N entries and about 2N tree hashes, and a statement per row cost more CPU
// in database/sql and the driver than in SQLite. The rows that do not fill
// a statement go one at a time. (The audit table's triggers run for each
// row, in order, as with one statement per row.)
const (
	logRowsPerInsert   = 16
	auditRowsPerInsert = 8
)

// auditParams is the number of columns insertAudit sets.
const auditParams = 17

// The multi-row INSERTs.
var (
	insertAudits     = multiRowInsert(`INSERT INTO audit (`+auditAllColumns+`) VALUES `, auditParams, auditRowsPerInsert)
	insertLogEntries = multiRowInsert(`INSERT INTO log_entries (idx, entry) VALUES `, 2, logRowsPerInsert)
	insertLogHashes  = multiRowInsert(`INSERT INTO log_hashes (idx, hash) VALUES `, 2, logRowsPerInsert)
)

// multiRowInsert is insert followed by n rows of params parameters.
func multiRowInsert(insert string, params, n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", params), ", ") + ")"
	return insert + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// statements are the append path's statements, prepared once and kept on each
// pooled connection (database/sql prepares a Stmt lazily per connection and a
// transaction reuses the one of its connection). The driver compiles SQL,
// and with it the audit table's triggers, at every prepare: under load that
// cost more CPU than the inserts themselves.
type statements struct {
	head, revokedAt, insert               *sql.Stmt
	logSize, logHashes, logEntry, logHash *sql.Stmt
	logEntries, logHashRows               *sql.Stmt // logRowsPerInsert rows each
	inserts                               *sql.Stmt // auditRowsPerInsert rows
}

// prepare prepares the statements unless they are; the caller holds
// writeSlot.
func (s *core) prepare(ctx context.Context) error {
	if s.stmts.insert != nil {
		return nil
	}
	for _, st := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&s.stmts.head, selectHead},
		{&s.stmts.revokedAt, selectRevokedAt},
		{&s.stmts.insert, insertAudit},
		{&s.stmts.logSize, selectLogSize},
		{&s.stmts.logHashes, selectLogHashes},
		{&s.stmts.logEntry, insertLogEntry},
		{&s.stmts.logHash, insertLogHash},
		{&s.stmts.logEntries, insertLogEntries},
		{&s.stmts.logHashRows, insertLogHashes},
		{&s.stmts.inserts, insertAudits},
	} {
		stmt, err := s.db.PrepareContext(ctx, st.sql)
		if err != nil {
			err = errors.Join(fmt.Errorf("prepare %q: %w", st.sql, err), s.stmts.close())
			s.stmts = statements{}
			return err
		}
		*st.dst = stmt
	}
	return nil
}

// close closes the statements that were prepared.
func (st *statements) close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{st.head, st.revokedAt, st.insert, st.logSize, st.logHashes, st.logEntry, st.logHash, st.logEntries, st.logHashRows, st.inserts} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}
