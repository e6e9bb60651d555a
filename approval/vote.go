package approval

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
)

// Voter is who votes, as its audit record names it.
type Voter struct {
	Identity  access.Identity
	Caller    string // the audit log's name for the caller (Identity.Name, or with its address when anonymous)
	RequestID string
}

// maxReason bounds a vote's reason.
const maxReason = 1024

// Vote records v's approval (approve) or denial of approval id with its
// audit record, after checking that v may vote on it: the approver role,
// the rule's group, never the requester (policy.MayApprove), once each and
// while it is pending and unexpired (the store, in the vote's
// transaction). digest, when not nil, must be the approval's canonical
// SHA-256: an approver approves the bytes it reviewed.
func (d *Desk) Vote(ctx context.Context, v Voter, id string, approve bool, reason string, digest []byte) (store.Approval, audit.Record, error) {
	who := v.Identity
	if len(reason) > maxReason {
		return store.Approval{}, audit.Record{}, &InvalidError{Field: "reason", Reason: fmt.Sprintf("%d bytes, over the limit of %d", len(reason), maxReason)}
	}
	if err := CheckID("id", id); err != nil {
		return store.Approval{}, audit.Record{}, err
	}
	ap, err := d.cfg.Store.Approval(ctx, id)
	if err != nil {
		return store.Approval{}, audit.Record{}, err
	}
	if err := d.cfg.Policy.MayApprove(Caller(who), ap.Requester, ap.Group); err != nil {
		d.cfg.Log.Warn("approval vote refused", "approval", id, "caller", who.Name, "err", err)
		d.cfg.Count("refused")
		return store.Approval{}, audit.Record{}, &ForbiddenError{Reason: fmt.Sprintf("approval %s: %v", id, err)}
	}
	if digest != nil && !bytes.Equal(digest, ap.CanonicalSHA256) {
		return store.Approval{}, audit.Record{}, &UnusableError{Reason: fmt.Sprintf("approval %s is for canonical SHA-256 %s, not %s: review it again",
			id, hex.EncodeToString(ap.CanonicalSHA256), hex.EncodeToString(digest))}
	}
	kind, step := audit.KindApprovalDeny, "denied"
	if approve {
		kind, step = audit.KindApprovalApprove, "approved"
	}
	caller := v.Caller
	if caller == "" {
		caller = who.Name
	}
	after, rec, err := d.cfg.Store.VoteApproval(ctx, id, store.Vote{Approver: who.Name, Approve: approve, Reason: reason}, func(after store.Approval) (audit.Record, error) {
		// The card by its SHA-256 only: its name is in the request's
		// record, sealed there when the agent is private, and a vote's
		// log entry must not show it in the clear.
		return audit.Record{
			Time: d.cfg.Now(), Caller: caller, RequestID: v.RequestID, Provenance: audit.EncodeProvenance(who.Provenance),
			CanonicalSHA256: after.CanonicalSHA256, Outcome: string(kind), Reason: reason, Detail: Detail(after),
		}, nil
	})
	if err != nil && !isNotFound(err) {
		d.cfg.Count("refused")
	}
	switch {
	case errors.Is(err, store.ErrSelfApproval):
		return store.Approval{}, audit.Record{}, &ForbiddenError{Reason: fmt.Sprintf("approval %s: %s asked for it and cannot vote on it", id, strictjson.QuoteForMessage(who.Name))}
	case errors.Is(err, store.ErrApprovalClosed), errors.Is(err, store.ErrDuplicateVote):
		return store.Approval{}, audit.Record{}, &UnusableError{Reason: fmt.Sprintf("approval %s: %v", id, err)}
	case err != nil:
		return store.Approval{}, audit.Record{}, err
	}
	d.cfg.Committed(rec)
	d.cfg.Count(step)
	d.cfg.Log.Info("approval vote", "approval", id, "approver", who.Name, "approve", approve, "state", after.State, "audit_seq", rec.Seq)
	return after, rec, nil
}

// Detail is the audit record's Detail of approval x after a step.
func Detail(x store.Approval) string {
	return audit.EncodeApprovalDetail(audit.ApprovalDetail{
		ID: x.ID, Rule: x.Rule, Agent: x.AgentID, Approvals: x.Approvals(), Required: x.Required,
		Expires: audit.ApprovalExpiry(x.ExpiresAt),
	})
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

func notFound(id string) error { return fmt.Errorf("approval %s: %w", id, store.ErrNotFound) }
