package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlrows"
)

// approvals is the Store's part for store.Approvals: tables approvals and
// approval_votes of migration 13. SQLite's write transaction (BEGIN
// IMMEDIATE) serialises votes, in this process and in others.
type approvals struct{ *core }

const (
	approvalByID = `SELECT ` + sqlrows.ApprovalColumns + ` FROM approvals WHERE id = ?`
	votesByID    = `SELECT ` + sqlrows.VoteColumns + ` FROM approval_votes WHERE approval_id = ? ORDER BY seq`
)

// CreateApproval stores a new pending approval and its audit record in one
// transaction.
func (s *approvals) CreateApproval(ctx context.Context, a store.Approval, rec audit.Record) (store.Approval, audit.Record, error) {
	if err := store.CheckApproval(a); err != nil {
		return store.Approval{}, audit.Record{}, err
	}
	recs, times, err := store.PrepareRegistryAudit(rec, audit.KindApprovalRequest)
	if err != nil {
		return store.Approval{}, audit.Record{}, err
	}
	expires, err := store.Nanos(a.ExpiresAt)
	if err != nil {
		return store.Approval{}, audit.Record{}, fmt.Errorf("store: approval expires_at: %w", err)
	}
	now := time.Now().UTC()
	err = s.writeFreeingWAL(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM approvals WHERE id = ?`, a.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("approval %s: %w", a.ID, store.ErrExists)
		}
		if err := s.appendTx(ctx, tx, recs, times); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO approvals (`+sqlrows.ApprovalColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, now.UnixNano(), expires, a.Requester, a.RequestID, a.Rule, a.Group, a.Required, a.CanonicalSHA256,
			a.CardName, a.CardVersion, a.AgentID, a.Request, a.Diff, store.ApprovalPending, recs[0].Seq)
		return err
	})
	if err != nil {
		return store.Approval{}, audit.Record{}, fmt.Errorf("store: create approval %s: %w", a.ID, err)
	}
	a.CreatedAt, a.State, a.Votes, a.Seq = now, store.ApprovalPending, nil, recs[0].Seq
	a.ExpiresAt = store.FromNanos(expires)
	return a, recs[0], nil
}

// Approval returns approval id with its votes.
func (s *approvals) Approval(ctx context.Context, id string) (store.Approval, error) {
	list, err := sqlrows.Approvals(ctx, rowsOf(s.db), values{}, approvalByID, id)
	if err == nil && len(list) == 0 {
		err = store.ErrNotFound
	}
	if err == nil {
		err = sqlrows.AttachVotes(ctx, rowsOf(s.db), values{}, list, votesByID, id)
	}
	if err != nil {
		return store.Approval{}, fmt.Errorf("store: approval %s: %w", id, err)
	}
	return list[0], nil
}

// ListApprovals returns the approvals f selects, newest first, with their
// votes.
func (s *approvals) ListApprovals(ctx context.Context, f store.ApprovalFilter) ([]store.Approval, error) {
	where, args, err := sqlrows.ApprovalWhere(f, func(int) string { return "?" }, func(t time.Time) any { return t.UnixNano() })
	if err != nil {
		return nil, err
	}
	page := ` FROM approvals` + where + ` ORDER BY created_at DESC, id DESC LIMIT ` + fmt.Sprint(sqlrows.ApprovalLimit(f))
	// One snapshot for the page and its votes.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	defer tx.Rollback()
	list, err := sqlrows.Approvals(ctx, rowsOf(tx), values{}, `SELECT `+sqlrows.ApprovalListColumns("X''")+page, args...)
	if err == nil && len(list) > 0 {
		err = sqlrows.AttachVotes(ctx, rowsOf(tx), values{}, list,
			`SELECT `+sqlrows.VoteColumns+` FROM approval_votes WHERE approval_id IN (SELECT id`+page+`) ORDER BY seq`, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	return list, nil
}

// VoteApproval adds a vote and its audit record in one transaction.
func (s *approvals) VoteApproval(ctx context.Context, id string, v store.Vote, record func(after store.Approval) (audit.Record, error)) (store.Approval, audit.Record, error) {
	if err := store.CheckVote(v); err != nil {
		return store.Approval{}, audit.Record{}, err
	}
	var (
		after  store.Approval
		recs   []audit.Record
		recErr error
	)
	err := s.writeFreeingWAL(ctx, func(tx *sql.Tx) error {
		var times []int64
		var err error
		after, recs, times, err = sqlrows.PrepareVote(ctx, rowsOf(tx), values{}, approvalByID, votesByID, id, v, func() (time.Time, error) { return time.Now().UTC(), nil }, record, &recErr)
		if err != nil {
			return err
		}
		if err := s.appendTx(ctx, tx, recs, times); err != nil {
			return err
		}
		cast := &after.Votes[len(after.Votes)-1]
		cast.Seq = recs[0].Seq
		if _, err := tx.ExecContext(ctx, `INSERT INTO approval_votes (`+sqlrows.VoteColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
			id, cast.Approver, cast.Time.UnixNano(), cast.Approve, cast.Reason, cast.Seq); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE approvals SET state = ? WHERE id = ?`, after.State, id)
		return err
	})
	if recErr != nil {
		return store.Approval{}, audit.Record{}, recErr
	}
	if err != nil {
		if errors.Is(err, store.ErrApprovalClosed) || errors.Is(err, store.ErrDuplicateVote) || errors.Is(err, store.ErrSelfApproval) {
			return store.Approval{}, audit.Record{}, err
		}
		return store.Approval{}, audit.Record{}, fmt.Errorf("store: vote on approval %s: %w", id, err)
	}
	return after, recs[0], nil
}

var _ store.ApprovalImporter = (*Store)(nil)

// ImportApproval stores a and its votes as they are (store.ApprovalImporter).
func (s *approvals) ImportApproval(ctx context.Context, a store.Approval) error {
	if err := store.CheckApproval(a); err != nil {
		return err
	}
	created, err := store.Nanos(a.CreatedAt)
	if err != nil {
		return fmt.Errorf("store: import approval %s: created_at: %w", a.ID, err)
	}
	expires, err := store.Nanos(a.ExpiresAt)
	if err != nil {
		return fmt.Errorf("store: import approval %s: expires_at: %w", a.ID, err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO approvals (`+sqlrows.ApprovalColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`,
			a.ID, created, expires, a.Requester, a.RequestID, a.Rule, a.Group, a.Required, a.CanonicalSHA256,
			a.CardName, a.CardVersion, a.AgentID, a.Request, a.Diff, a.State, a.Seq)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // stored by an earlier run
		}
		for _, v := range a.Votes {
			if _, err := tx.ExecContext(ctx, `INSERT INTO approval_votes (`+sqlrows.VoteColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
				a.ID, v.Approver, v.Time.UnixNano(), v.Approve, v.Reason, v.Seq); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: import approval %s: %w", a.ID, err)
	}
	return nil
}
