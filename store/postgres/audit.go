package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlrows"
	"github.com/cardsign/cardsign/transparency"
)

// auditTrail is the Store's part for store.AuditLog: the hash-chained audit records and their head.
type auditTrail struct{ *core }

const auditColumns = sqlrows.AuditColumns

// insertAudit inserts a whole batch with one statement, one array per
// column: one round trip whatever the batch size, and one run of the
// statement trigger that checks the rows extend audit_head and advances it.
const insertAudit = `INSERT INTO audit (` + auditColumns + `)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[],
	$8::text[], $9::text[], $10::text[], $11::text[], $12::bytea[], $13::bytea[], $14::text[], $15::text[], $16::text[], $17::text[])`

// lockKeysShared locks the key rows of a batch's kids FOR SHARE, in the
// bytewise kid order UpdateKeys updates them in (no lock cycle), and says
// which are revoked.
const lockKeysShared = `SELECT kid, revoked_at IS NOT NULL FROM keys WHERE kid = ANY($1) ORDER BY kid COLLATE "C" FOR SHARE`

// AppendAudit appends recs in one transaction, chaining them from the audit
// head, and returns them as stored. Any Seq, PrevHash or Hash the caller set
// is replaced; Time is normalized to UTC and an empty Outcome to
// audit.OutcomeSigned (the hash is the same). A record whose Outcome is
// invalid (audit.Record.CheckOutcome) fails the whole batch, and so does a
// signed record by a revoked key (store.ErrKeyRevoked).
//
// Concurrency: the transaction first locks the audit_head row FOR UPDATE, so
// appends from every replica run one after the other, each chaining from the
// head the previous one committed: one chain, never forked, and no sequence
// (nextval) whose values a rolled-back append would skip.
//
// Revocation: "once a revocation is committed, no record by that key is
// committed after it" (store.ErrKeyRevoked). At READ COMMITTED a plain read
// of keys.revoked_at is not enough: an append could read NULL, a revoke
// commit, and the append commit after it. So the append reads revoked_at
// with SELECT … FOR SHARE, which conflicts with the row lock the revoking
// UPDATE takes (FOR KEY SHARE would not: an UPDATE that leaves the key
// columns alone takes FOR NO KEY UPDATE, which only conflicts with FOR
// SHARE and stronger). Either the append locks first, and the revoke's
// UPDATE waits until the append has committed (its records precede the
// revocation), or the revoke updates first, and the append's FOR SHARE
// waits for the revoke to commit, then (READ COMMITTED re-reads a row
// changed under a lock) sees revoked_at set and refuses.
func (s *auditTrail) AppendAudit(ctx context.Context, recs []audit.Record) ([]audit.Record, error) {
	out, times, err := store.PrepareAudit(recs)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	var kids []string
	for i, r := range out {
		if err := checkText(r); err != nil {
			return nil, fmt.Errorf("store: append audit record %d: %w", i, err)
		}
		// Only signatures are checked: refused records sign nothing and
		// have no kid, and a key administration record (a revocation)
		// may name a revoked key.
		if r.Kind() == audit.KindSigned && !slices.Contains(kids, r.KID) {
			kids = append(kids, r.KID)
		}
	}
	var app transparency.Appended
	err = s.inTx(ctx, func(tx pgx.Tx) (err error) {
		app, err = s.appendTx(ctx, tx, out, times, kids)
		return err
	})
	if err != nil {
		return nil, wrap(ctx, fmt.Sprintf("append %d audit records", len(recs)), err)
	}
	s.tail.Committed(app)
	return out, nil
}

// appendTx appends out (checked by store.PrepareAudit and checkText, their
// times in nanoseconds) in tx, assigning Seq, PrevHash and Hash in place;
// kids are the kids of out's signatures, refused if revoked. It returns what
// it appended to the log, for the tail once tx has committed.
func (s *core) appendTx(ctx context.Context, tx pgx.Tx, out []audit.Record, times []int64, kids []string) (transparency.Appended, error) {
	var app transparency.Appended
	err := func() error {
		seq, prev, size, err := lockHead(ctx, tx)
		if err != nil {
			return err
		}
		// The transparency log's leaf i is record i+1's entry: the log
		// must end where the audit log does before both grow. Records
		// without leaves (appended by a cardsignd from before the log while
		// this one ran: a rolling upgrade) become leaves first, here.
		s.tail.Appending(seq)
		caughtUp := size < seq
		for size < seq {
			if size, err = catchUpChunk(ctx, tx, size, seq); err != nil {
				return err
			}
		}
		if err := transparency.CheckSize(size, seq); err != nil {
			return err
		}
		cols := newAuditCols(len(out))
		for i := range out {
			r := &out[i]
			r.Seq = seq + int64(i) + 1
			r.PrevHash = prev
			r.Hash = r.ComputeHash(prev)
			cols.add(r, times[i])
			prev = r.Hash
		}
		// One round trip: the revocation check's locks, then the inserts.
		// Should a key be revoked, the inserted rows are rolled back.
		b := &pgx.Batch{}
		if len(kids) > 0 {
			b.Queue(lockKeysShared, kids)
		}
		b.Queue(insertAudit, cols.args()...)
		if app, err = s.tail.Extend(ctx, txLog{tx, b}, seq, out, caughtUp); err != nil {
			return err
		}
		br := tx.SendBatch(ctx, b)
		if len(kids) > 0 {
			if err := refuseRevoked(br); err != nil {
				return errors.Join(err, br.Close())
			}
		}
		// The audit rows, the log's entries, its hashes.
		for range 3 {
			if _, err := br.Exec(); err != nil {
				return errors.Join(err, br.Close())
			}
		}
		return br.Close()
	}()
	return app, err
}

// lockHead locks the audit_head row, which serializes appends (and the
// transparency log's catch-up), and returns it and the log's size, in one
// round trip. The size is read by a statement of its own, which starts
// once the lock is held: at READ COMMITTED each statement sees what was
// committed when it started, so the locking statement, which may have
// waited for another append, would see the size from before that append.
func lockHead(ctx context.Context, tx pgx.Tx) (seq int64, hash []byte, size int64, err error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT seq, hash FROM audit_head WHERE id = 1 FOR UPDATE`)
	b.Queue(selectLogSize)
	br := tx.SendBatch(ctx, b)
	err = br.QueryRow().Scan(&seq, &hash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = errors.New("the audit_head row is missing: the database was edited outside cardsign " +
			"(the row is never deleted, so sequence numbers are never reused); restore the database from a backup")
	case err != nil:
		err = fmt.Errorf("audit head: %w", err)
	default:
		if err = br.QueryRow().Scan(&size); err != nil {
			err = fmt.Errorf("transparency log size: %w", err)
		}
	}
	if err = errors.Join(err, br.Close()); err != nil {
		return 0, nil, 0, err
	}
	return seq, hash, size, nil
}

// refuseRevoked reads lockKeysShared's result: store.ErrKeyRevoked for the
// first revoked kid. Records of kids the store does not know are not
// refused, as in the SQLite store.
func refuseRevoked(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	var revoked []string
	for rows.Next() {
		var kid string
		var r bool
		if err := rows.Scan(&kid, &r); err != nil {
			return err
		}
		if r {
			revoked = append(revoked, kid)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(revoked) > 0 {
		return fmt.Errorf("%w: %s", store.ErrKeyRevoked, strings.Join(revoked, ", "))
	}
	return nil
}

// checkText refuses what PostgreSQL text cannot hold (a NUL byte, invalid
// UTF-8) with a message saying so, rather than the server's encoding error.
func checkText(r audit.Record) error {
	for _, f := range []struct{ name, v string }{
		{"caller", r.Caller}, {"request id", r.RequestID}, {"card name", r.CardName}, {"card version", r.CardVersion},
		{"kid", r.KID}, {"alg", r.Alg}, {"profile", r.Profile}, {"signature", r.Signature},
		{"outcome", r.Outcome}, {"reason", r.Reason}, {"provenance", r.Provenance}, {"detail", r.Detail},
	} {
		if !validText(f.v) {
			return fmt.Errorf("%s is not UTF-8 text without NUL bytes", f.name)
		}
	}
	return nil
}

// auditCols holds a batch column by column, for insertAudit's arrays.
type auditCols struct {
	seq, time                                                                                             []int64
	caller, requestID, cardName, cardVersion, kid, alg, profile, sig, outcome, reason, provenance, detail []string
	canonical, prevHash, hash                                                                             [][]byte
}

func newAuditCols(n int) *auditCols {
	return &auditCols{
		seq: make([]int64, 0, n), time: make([]int64, 0, n),
		caller: make([]string, 0, n), requestID: make([]string, 0, n), cardName: make([]string, 0, n),
		cardVersion: make([]string, 0, n), kid: make([]string, 0, n), alg: make([]string, 0, n),
		profile: make([]string, 0, n), sig: make([]string, 0, n), outcome: make([]string, 0, n), reason: make([]string, 0, n), provenance: make([]string, 0, n), detail: make([]string, 0, n),
		canonical: make([][]byte, 0, n), prevHash: make([][]byte, 0, n), hash: make([][]byte, 0, n),
	}
}

func (c *auditCols) add(r *audit.Record, t int64) {
	c.seq, c.time = append(c.seq, r.Seq), append(c.time, t)
	c.caller, c.requestID = append(c.caller, r.Caller), append(c.requestID, r.RequestID)
	c.cardName, c.cardVersion = append(c.cardName, r.CardName), append(c.cardVersion, r.CardVersion)
	c.canonical = append(c.canonical, r.CanonicalSHA256)
	c.kid, c.alg, c.profile, c.sig = append(c.kid, r.KID), append(c.alg, r.Alg), append(c.profile, r.Profile), append(c.sig, r.Signature)
	c.prevHash, c.hash = append(c.prevHash, r.PrevHash), append(c.hash, r.Hash)
	c.outcome, c.reason = append(c.outcome, r.Outcome), append(c.reason, r.Reason)
	c.provenance, c.detail = append(c.provenance, r.Provenance), append(c.detail, r.Detail)
}

// args are insertAudit's arguments, in auditColumns order.
func (c *auditCols) args() []any {
	return []any{c.seq, c.time, c.caller, c.requestID, c.cardName, c.cardVersion, c.canonical,
		c.kid, c.alg, c.profile, c.sig, c.prevHash, c.hash, c.outcome, c.reason, c.provenance, c.detail}
}

// AuditHead returns the Seq and Hash of the last audit record ever appended
// (the high-water mark, kept even if records are deleted behind the store's
// back), or 0 and audit.Genesis() when none was.
func (s *auditTrail) AuditHead(ctx context.Context) (int64, []byte, error) {
	var seq int64
	var hash []byte
	err := s.pool.QueryRow(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&seq, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		err = errors.New("the audit_head row is missing: the database was edited outside cardsign; restore it from a backup")
	}
	if err != nil {
		return 0, nil, wrap(ctx, "audit head", err)
	}
	return seq, hash, nil
}

// ListAudit returns up to limit records with Seq > afterSeq, ascending;
// limit <= 0 means no limit. Each record's Hosts are read from its
// transparency-log entry.
func (s *auditTrail) ListAudit(ctx context.Context, afterSeq int64, limit int) ([]audit.Record, error) {
	recs, err := listAudit(ctx, s.pool, afterSeq, limit)
	if err != nil {
		return nil, wrap(ctx, fmt.Sprintf("list audit after %d", afterSeq), err)
	}
	return recs, nil
}

// listAudit is ListAudit through q: the pool, or a transaction (the
// transparency log's catch-up).
func listAudit(ctx context.Context, q querier, afterSeq int64, limit int) ([]audit.Record, error) {
	var lim *int64 // NULL: LIMIT ALL
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	return sqlrows.ListAudit(ctx, rowsOf(q), `SELECT `+auditColumns+`, entry FROM audit LEFT JOIN log_entries ON idx = seq - 1
		WHERE seq > $1 ORDER BY seq LIMIT $2`, afterSeq, lim)
}
