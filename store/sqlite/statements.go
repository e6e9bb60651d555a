package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The SQL of the audit append path, the store's hot path.
const (
	selectHead      = `SELECT seq, hash FROM audit_head WHERE id = 1`
	selectRevokedAt = `SELECT revoked_at FROM keys WHERE kid = ?`
	insertAudit     = `INSERT INTO audit (` + auditAllColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// statements are the append path's statements, prepared once and kept on each
// pooled connection (database/sql prepares a Stmt lazily per connection and a
// transaction reuses the one of its connection). The driver compiles SQL,
// and with it the audit table's triggers, at every prepare: under load that
// cost more CPU than the inserts themselves.
type statements struct {
	head, revokedAt, insert *sql.Stmt
}

// prepare prepares the statements unless they are; the caller holds
// writeSlot.
func (s *Store) prepare(ctx context.Context) error {
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
	for _, stmt := range []*sql.Stmt{st.head, st.revokedAt, st.insert} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}
