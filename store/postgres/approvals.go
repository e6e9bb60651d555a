package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlrows"
	"github.com/cardsign/cardsign/transparency"
)

// approvals is the Store's part for store.Approvals: tables approvals and
// approval_votes of migration 10. A vote locks its approval's row (FOR
// UPDATE): two replicas voting at once are serialised, so a vote counts
// once and the request becomes approved once.
type approvals struct{ *core }

const (
	approvalForUpdate = `SELECT ` + sqlrows.ApprovalColumns + ` FROM approvals WHERE id = $1 FOR UPDATE`
	approvalByID      = `SELECT ` + sqlrows.ApprovalColumns + ` FROM approvals WHERE id = $1`
	votesByID         = `SELECT ` + sqlrows.VoteColumns + ` FROM approval_votes WHERE approval_id = $1 ORDER BY seq`
)

// CreateApproval stores a new pending approval and its audit record in one
// transaction; its CreatedAt is the database server's clock.
func (s *approvals) CreateApproval(ctx context.Context, a store.Approval, rec audit.Record) (store.Approval, audit.Record, error) {
	if err := store.CheckApproval(a); err != nil {
		return store.Approval{}, audit.Record{}, err
	}
	recs, times, err := store.PrepareRegistryAudit(rec, audit.KindApprovalRequest)
	if err != nil {
		return store.Approval{}, audit.Record{}, err
	}
	if err := checkText(recs[0]); err != nil {
		return store.Approval{}, audit.Record{}, fmt.Errorf("store: create approval %s: %w", a.ID, err)
	}
	var app transparency.Appended
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if app, err = s.appendTx(ctx, tx, recs, times, nil); err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `INSERT INTO approvals (`+sqlrows.ApprovalColumns+`)
			VALUES ($1, clock_timestamp(), $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING created_at`,
			a.ID, a.ExpiresAt, a.Requester, a.RequestID, a.Rule, a.Group, a.Required, a.CanonicalSHA256,
			a.CardName, a.CardVersion, a.AgentID, a.Request, a.Diff, store.ApprovalPending, recs[0].Seq).Scan(&a.CreatedAt)
		if isUniqueViolation(err, "approvals_pkey") {
			return fmt.Errorf("approval %s: %w", a.ID, store.ErrExists)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrExists) {
			return store.Approval{}, audit.Record{}, fmt.Errorf("store: create approval: %w", err)
		}
		return store.Approval{}, audit.Record{}, wrap(ctx, "create approval "+a.ID, err)
	}
	s.tail.Committed(app)
	a.CreatedAt, a.ExpiresAt = a.CreatedAt.UTC(), a.ExpiresAt.UTC()
	a.State, a.Votes, a.Seq = store.ApprovalPending, nil, recs[0].Seq
	return a, recs[0], nil
}

// Approval returns approval id with its votes.
func (s *approvals) Approval(ctx context.Context, id string) (store.Approval, error) {
	list, err := sqlrows.Approvals(ctx, rowsOf(s.pool), values{}, approvalByID, id)
	if err == nil && len(list) == 0 {
		return store.Approval{}, fmt.Errorf("store: approval %s: %w", id, store.ErrNotFound)
	}
	if err == nil {
		err = sqlrows.AttachVotes(ctx, rowsOf(s.pool), values{}, list, votesByID, id)
	}
	if err != nil {
		return store.Approval{}, wrap(ctx, "approval "+id, err)
	}
	return list[0], nil
}

// ListApprovals returns the approvals f selects, newest first, with their
// votes, from one snapshot.
func (s *approvals) ListApprovals(ctx context.Context, f store.ApprovalFilter) ([]store.Approval, error) {
	where, args, err := sqlrows.ApprovalWhere(f, func(n int) string { return "$" + strconv.Itoa(n) }, func(t time.Time) any { return t })
	if err != nil {
		return nil, err
	}
	page := ` FROM approvals` + where + ` ORDER BY created_at DESC, id DESC LIMIT ` + strconv.Itoa(sqlrows.ApprovalLimit(f))
	var list []store.Approval
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		list, err = sqlrows.Approvals(ctx, rowsOf(tx), values{}, `SELECT `+sqlrows.ApprovalListColumns("''::bytea")+page, args...)
		if err == nil && len(list) > 0 {
			err = sqlrows.AttachVotes(ctx, rowsOf(tx), values{}, list,
				`SELECT `+sqlrows.VoteColumns+` FROM approval_votes WHERE approval_id IN (SELECT id`+page+`) ORDER BY seq`, args...)
		}
		return err
	})
	if err != nil {
		return nil, wrap(ctx, "list approvals", err)
	}
	return list, nil
}

// VoteApproval adds a vote and its audit record in one transaction, the
// approval's row locked.
func (s *approvals) VoteApproval(ctx context.Context, id string, v store.Vote, record func(after store.Approval) (audit.Record, error)) (store.Approval, audit.Record, error) {
	if err := store.CheckVote(v); err != nil {
		return store.Approval{}, audit.Record{}, err
	}
	var (
		after  store.Approval
		recs   []audit.Record
		recErr error
		app    transparency.Appended
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		clock := func() (time.Time, error) { // read once the row is locked
			var now time.Time
			err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now)
			return now.UTC(), err
		}
		var times []int64
		var err error
		after, recs, times, err = sqlrows.PrepareVote(ctx, rowsOf(tx), values{}, approvalForUpdate, votesByID, id, v, clock, record, &recErr)
		if err != nil {
			return err
		}
		if err := checkText(recs[0]); err != nil {
			return err
		}
		if app, err = s.appendTx(ctx, tx, recs, times, nil); err != nil {
			return err
		}
		cast := &after.Votes[len(after.Votes)-1]
		cast.Seq = recs[0].Seq
		if _, err := tx.Exec(ctx, `INSERT INTO approval_votes (`+sqlrows.VoteColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
			id, cast.Approver, cast.Time, cast.Approve, cast.Reason, cast.Seq); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE approvals SET state = $1 WHERE id = $2`, after.State, id)
		return err
	})
	if recErr != nil {
		return store.Approval{}, audit.Record{}, recErr
	}
	if err != nil {
		if errors.Is(err, store.ErrApprovalClosed) || errors.Is(err, store.ErrDuplicateVote) || errors.Is(err, store.ErrSelfApproval) || errors.Is(err, store.ErrNotFound) {
			return store.Approval{}, audit.Record{}, err
		}
		return store.Approval{}, audit.Record{}, wrap(ctx, "vote on approval "+id, err)
	}
	s.tail.Committed(app)
	return after, recs[0], nil
}

var _ store.ApprovalImporter = (*Store)(nil)

// ImportApproval stores a and its votes as they are (store.ApprovalImporter).
func (s *approvals) ImportApproval(ctx context.Context, a store.Approval) error {
	if err := store.CheckApproval(a); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO approvals (`+sqlrows.ApprovalColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) ON CONFLICT (id) DO NOTHING`,
			a.ID, a.CreatedAt, a.ExpiresAt, a.Requester, a.RequestID, a.Rule, a.Group, a.Required, a.CanonicalSHA256,
			a.CardName, a.CardVersion, a.AgentID, a.Request, a.Diff, a.State, a.Seq)
		if err != nil || tag.RowsAffected() == 0 {
			return err // or stored by an earlier run
		}
		for _, v := range a.Votes {
			if _, err := tx.Exec(ctx, `INSERT INTO approval_votes (`+sqlrows.VoteColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
				a.ID, v.Approver, v.Time, v.Approve, v.Reason, v.Seq); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap(ctx, "import approval "+a.ID, err)
}
