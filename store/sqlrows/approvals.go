package sqlrows

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
)

// ApprovalColumns are the approvals columns, in the order Approvals scans
// them.
const ApprovalColumns = `id, created_at, expires_at, requester, request_id, rule, grp, required, canonical_sha256, card_name, card_version, agent_id, request, diff, state, seq`

// ApprovalListColumns are ApprovalColumns with emptyBytes (the dialect's
// empty blob literal) read for the request: a page of approvals does not
// carry their cards.
func ApprovalListColumns(emptyBytes string) string {
	return strings.Replace(ApprovalColumns, " request,", " "+emptyBytes+" AS request,", 1)
}

// VoteColumns are the approval_votes columns, in the order Votes scans
// them.
const VoteColumns = `approval_id, approver, voted_at, approve, reason, seq`

// Approvals reads approvals with sql, a SELECT of ApprovalColumns; their
// votes are read apart (Votes).
func Approvals(ctx context.Context, q Querier, v Values, sql string, args ...any) ([]store.Approval, error) {
	return query(ctx, q, func(rows Rows) (store.Approval, error) {
		var a store.Approval
		createdDest, created := v.Time()
		expiresDest, expires := v.Time()
		if err := rows.Scan(&a.ID, createdDest, expiresDest, &a.Requester, &a.RequestID, &a.Rule, &a.Group, &a.Required, &a.CanonicalSHA256,
			&a.CardName, &a.CardVersion, &a.AgentID, &a.Request, &a.Diff, &a.State, &a.Seq); err != nil {
			return store.Approval{}, err
		}
		var err error
		if a.CreatedAt, err = created(); err == nil {
			a.ExpiresAt, err = expires()
		}
		return a, err
	}, sql, args...)
}

// vote is a row of approval_votes.
type vote struct {
	approval string
	store.Vote
}

// AttachVotes reads votes with sql, a SELECT of VoteColumns ordered by
// seq, and appends each to its approval in list.
func AttachVotes(ctx context.Context, q Querier, v Values, list []store.Approval, sql string, args ...any) error {
	votes, err := query(ctx, q, func(rows Rows) (vote, error) {
		var x vote
		atDest, at := v.Time()
		if err := rows.Scan(&x.approval, &x.Approver, atDest, &x.Approve, &x.Reason, &x.Seq); err != nil {
			return vote{}, err
		}
		var err error
		x.Time, err = at()
		return x, err
	}, sql, args...)
	if err != nil {
		return err
	}
	index := make(map[string]int, len(list))
	for i, a := range list {
		index[a.ID] = i
	}
	for _, x := range votes {
		if i, ok := index[x.approval]; ok {
			list[i].Votes = append(list[i].Votes, x.Vote)
		}
	}
	return nil
}

// ApprovalWhere is the WHERE clause (with " WHERE " or "") and arguments of
// f, over table approvals: ph writes the n-th placeholder of the dialect,
// at a time argument as the dialect stores times. The caller adds the order
// (created_at DESC, id DESC) and the limit.
func ApprovalWhere(f store.ApprovalFilter, ph func(n int) string, at func(time.Time) any) (string, []any, error) {
	var conds []string
	var args []any
	add := func(cond string, val any) { // cond holds one placeholder, "?"
		args = append(args, val)
		conds = append(conds, strings.Replace(cond, "?", ph(len(args)), 1))
	}
	switch f.State {
	case "":
	case store.ApprovalPending, store.ApprovalApproved, store.ApprovalExpired:
		if f.Now.IsZero() {
			return "", nil, fmt.Errorf("store: list approvals: state %s needs the time that decides expiry", f.State)
		}
		if f.State == store.ApprovalExpired {
			add("state <> 'denied' AND expires_at <= ?", at(f.Now))
		} else {
			add("state = ?", f.State)
			add("expires_at > ?", at(f.Now))
		}
	case store.ApprovalDenied:
		add("state = ?", f.State)
	default:
		return "", nil, fmt.Errorf("store: list approvals: unknown state %q", f.State)
	}
	if f.Requester != "" {
		add("requester = ?", f.Requester)
	}
	if f.Before != "" {
		add("(created_at, id) < (SELECT created_at, id FROM approvals WHERE id = ?)", f.Before)
	}
	if len(conds) == 0 {
		return "", nil, nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args, nil
}

// ApprovalLimit is f's page size.
func ApprovalLimit(f store.ApprovalFilter) int {
	if f.Limit <= 0 {
		return 100
	}
	return f.Limit
}

// PrepareVote is the part of store.Approvals.VoteApproval both stores do
// alike, inside the store's transaction tx and under its locks: it reads
// approval id (one, with approvalSQL, a SELECT of ApprovalColumns taking
// id) and its votes (votesSQL, a SELECT of VoteColumns taking id),
// decides the vote at the store's now, read after the approval's row is
// locked (store.ApplyVote), has record make
// its audit record and checks it. It returns the approval after the vote,
// the record and its time. A record error is stored in *recErr (the
// caller's error, returned as is) and returned.
func PrepareVote(ctx context.Context, tx Querier, v Values, approvalSQL, votesSQL, id string, x store.Vote, clock func() (time.Time, error),
	record func(after store.Approval) (audit.Record, error), recErr *error) (store.Approval, []audit.Record, []int64, error) {
	list, err := Approvals(ctx, tx, v, approvalSQL, id)
	if err != nil {
		return store.Approval{}, nil, nil, err
	}
	if len(list) == 0 {
		return store.Approval{}, nil, nil, fmt.Errorf("approval %s: %w", id, store.ErrNotFound)
	}
	if err := AttachVotes(ctx, tx, v, list, votesSQL, id); err != nil {
		return store.Approval{}, nil, nil, err
	}
	now, err := clock()
	if err != nil {
		return store.Approval{}, nil, nil, err
	}
	after, err := store.ApplyVote(list[0], x, now)
	if err != nil {
		return store.Approval{}, nil, nil, err
	}
	rec, err := record(after)
	if err != nil {
		*recErr = err
		return store.Approval{}, nil, nil, err
	}
	kind := audit.KindApprovalDeny
	if x.Approve {
		kind = audit.KindApprovalApprove
	}
	recs, times, err := store.PrepareRegistryAudit(rec, kind)
	return after, recs, times, err
}
