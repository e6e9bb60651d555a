package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlrows"
	"github.com/cardsign/cardsign/transparency"
)

// auditTrail is the Store's part for store.AuditLog: the hash-chained audit records and their head.
type auditTrail struct{ *core }

// auditColumns are the columns of migration 1, which every audit row has.
const auditColumns = `seq, time, caller, request_id, card_name, card_version, canonical_sha256, kid, alg, profile, signature, prev_hash, hash`

// auditAllColumns adds the outcome columns of migration 2, the provenance
// of migration 6 and the detail of migration 10.
const auditAllColumns = auditColumns + `, outcome, reason, provenance, detail`

// AppendAudit appends recs in one durable transaction, chaining them from the
// current head, and returns them as stored. Any Seq, PrevHash or Hash the
// caller set is replaced; Time is normalized to UTC and an empty Outcome to
// audit.OutcomeSigned (the hash is the same). A record whose Outcome is
// invalid (audit.Record.CheckOutcome) fails the whole batch.
func (s *auditTrail) AppendAudit(ctx context.Context, recs []audit.Record) ([]audit.Record, error) {
	out, times, err := store.PrepareAudit(recs)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	// On a full volume, truncating the WAL may give back the space.
	err = s.writeFreeingWAL(ctx, func(tx *sql.Tx) error { return s.appendTx(ctx, tx, out, times) })
	if err != nil {
		return nil, fmt.Errorf("store: append %d audit records: %w", len(recs), err)
	}
	return out, nil
}

// appendTx appends out (prepared by store.PrepareAudit, their times in
// nanoseconds) in tx, a write transaction, assigning Seq, PrevHash and Hash
// in place; what it appends to the log is the tail's once tx commits
// (writeTx).
func (s *core) appendTx(ctx context.Context, tx *sql.Tx, out []audit.Record, times []int64) error {
	// The head read and the inserts share one BEGIN IMMEDIATE
	// transaction: no other writer, in this process or another, can
	// append in between.
	if err := s.prepare(ctx); err != nil {
		return err
	}
	if err := refuseRevoked(ctx, tx.StmtContext(ctx, s.stmts.revokedAt), out); err != nil {
		return err
	}
	seq, prev, err := scanHead(tx.StmtContext(ctx, s.stmts.head).QueryRowContext(ctx))
	if err != nil {
		return err
	}
	// The transparency log's leaf i is record i+1's entry: the log
	// must end where the audit log does before both grow.
	size, err := s.logSize(ctx, tx)
	if err != nil {
		return err
	}
	s.tail.Appending(seq)
	caughtUp := size < seq
	for size < seq {
		// Records without leaves: appended by a cardsignd from before
		// the log while this one ran (a rolling upgrade). They become
		// leaves first, in this transaction.
		if size, err = s.catchUpChunk(ctx, tx, size, seq); err != nil {
			return err
		}
	}
	if err := transparency.CheckSize(size, seq); err != nil {
		return err
	}
	for i := range out {
		r := &out[i]
		r.Seq = seq + int64(i) + 1
		r.PrevHash = prev
		r.Hash = r.ComputeHash(prev)
		prev = r.Hash
	}
	if err := s.insertAudit(ctx, tx, out, times); err != nil {
		return err
	}
	app, err := s.tail.Extend(ctx, txLog{s, tx}, seq, out, caughtUp)
	s.appended = app
	return err
}

// insertAudit inserts out (chained: Seq, PrevHash and Hash set), their
// times in nanoseconds, inside tx: auditRowsPerInsert rows per statement
// while they fill one, then one at a time.
func (s *core) insertAudit(ctx context.Context, tx *sql.Tx, out []audit.Record, times []int64) error {
	args := make([]any, 0, auditParams*min(len(out), auditRowsPerInsert))
	row := func(dst []any, i int) []any {
		r := &out[i]
		return append(dst, r.Seq, times[i], r.Caller, r.RequestID, r.CardName, r.CardVersion,
			r.CanonicalSHA256, r.KID, r.Alg, r.Profile, r.Signature, r.PrevHash, r.Hash, r.Outcome, r.Reason, r.Provenance, r.Detail)
	}
	i := 0
	if len(out) >= auditRowsPerInsert {
		stmt := tx.StmtContext(ctx, s.stmts.inserts)
		defer stmt.Close()
		for ; i+auditRowsPerInsert <= len(out); i += auditRowsPerInsert {
			args = args[:0]
			for k := i; k < i+auditRowsPerInsert; k++ {
				args = row(args, k)
			}
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("seq %d to %d: %w", out[i].Seq, out[i+auditRowsPerInsert-1].Seq, err)
			}
		}
	}
	if i == len(out) {
		return nil
	}
	stmt := tx.StmtContext(ctx, s.stmts.insert)
	defer stmt.Close()
	for ; i < len(out); i++ {
		args = row(args[:0], i)
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("seq %d: %w", out[i].Seq, err)
		}
	}
	return nil
}

// AuditHead returns the Seq and Hash of the last audit record ever appended
// (the high-water mark, kept even if records are deleted behind the store's
// back), or 0 and audit.Genesis() when none was.
func (s *auditTrail) AuditHead(ctx context.Context) (int64, []byte, error) {
	stmt, err := s.headStatement(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("store: audit head: %w", err)
	}
	seq, hash, err := scanHead(stmt.QueryRowContext(ctx))
	if err != nil {
		return 0, nil, fmt.Errorf("store: audit head: %w", err)
	}
	return seq, hash, nil
}

// headStatement returns the prepared audit-head read (readStatement).
func (s *core) headStatement(ctx context.Context) (*sql.Stmt, error) {
	return s.readStatement(ctx, &s.headStmt, selectHead)
}

// readStatement returns the statement of query kept in p, preparing it at
// the first call (two concurrent first calls keep one statement and close
// the other).
func (s *core) readStatement(ctx context.Context, p *atomic.Pointer[sql.Stmt], query string) (*sql.Stmt, error) {
	if st := p.Load(); st != nil {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if !p.CompareAndSwap(nil, st) {
		st.Close()
		return p.Load(), nil
	}
	return st, nil
}

// rowQuerier is what several reads need of *sql.DB and *sql.Tx.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// scanHead reads the row of selectHead: the high-water mark of migration 3,
// not the audit table's last row (after records were deleted from the end
// of the log, appends go on from the last seq ever used, so the gap shows).
func scanHead(row *sql.Row) (int64, []byte, error) {
	var seq int64
	var hash []byte
	err := row.Scan(&seq, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, errors.New("the audit_head row is missing: the database was edited outside cardsign " +
			"(the row is never deleted, so sequence numbers are never reused); restore the database from a backup")
	}
	if err != nil {
		return 0, nil, err
	}
	return seq, hash, nil
}

// ListAudit returns up to limit records with Seq > afterSeq, ascending;
// limit <= 0 means no limit. Each record's Hosts are read from its
// transparency-log entry.
func (s *auditTrail) ListAudit(ctx context.Context, afterSeq int64, limit int) ([]audit.Record, error) {
	recs, err := listAudit(ctx, s.db, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list audit after %d: %w", afterSeq, err)
	}
	return recs, nil
}

// listAudit is ListAudit through q: the store's connections, or a
// transaction (the transparency log's catch-up).
func listAudit(ctx context.Context, q querier, afterSeq int64, limit int) ([]audit.Record, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	return sqlrows.ListAudit(ctx, rowsOf(q), `SELECT `+auditAllColumns+`, entry FROM audit LEFT JOIN log_entries ON idx = seq - 1
		WHERE seq > ? ORDER BY seq LIMIT ?`, afterSeq, limit)
}

// refuseRevoked fails the transaction when a record's key is revoked, at any
// time: the record's time is taken before its commit, so a signature made
// just before a revocation could otherwise be committed (and returned) after
// it, with a time that puts it before revoked_at. Write transactions are
// serialized (BEGIN IMMEDIATE), so every record by a key is committed before
// its revocation or not at all. A replica signs from a key list that may be
// up to a second old; this check makes sure no signature by a revoked key is
// returned. Records of kids the store does not know are not checked, nor
// are records of other kinds than signatures: a refused request signed
// nothing, and a key administration record (a revocation among them) may
// name a revoked key.
func refuseRevoked(ctx context.Context, revokedAt *sql.Stmt, recs []audit.Record) error {
	defer revokedAt.Close()
	kids := map[string]sql.NullInt64{}
	for _, r := range recs {
		if r.Kind() != audit.KindSigned {
			continue
		}
		at, seen := kids[r.KID]
		if !seen {
			err := revokedAt.QueryRowContext(ctx, r.KID).Scan(&at)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			kids[r.KID] = at
		}
		if at.Valid {
			return fmt.Errorf("%w: %s", store.ErrKeyRevoked, r.KID)
		}
	}
	return nil
}
