package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cardsign/cardsign/audit"
)

// Approval states (Approval.State). An approval past its ExpiresAt is
// expired whatever its stored state says while it is pending: Expired
// reports that, and VoteApproval refuses it.
const (
	ApprovalPending  = "pending"  // waiting for approvers
	ApprovalApproved = "approved" // Required approvals given: the requester may have the card signed
	ApprovalDenied   = "denied"   // an approver denied it: closed for good
	// ApprovalExpired is no stored state: ApprovalFilter selects with it the
	// approvals past their expiry that were not denied.
	ApprovalExpired = "expired"
)

// Approval is a signing request that a signing policy rule held for
// approval: the card (by its canonical SHA-256 and the request that asked
// for it), who asked, the rule, and the approvers' votes.
type Approval struct {
	ID        string    // opaque, chosen by the caller ("apr_" and 26 base32 characters)
	CreatedAt time.Time // UTC, nanoseconds
	ExpiresAt time.Time // after this it can be neither voted on nor used
	Requester string    // the requesting caller's identity
	RequestID string    // the requesting call's request id
	Rule      string    // the policy rule that asked for approval
	Group     string    // the approver group the rule names; "" for any approver
	Required  int       // approvals needed, 1 to MaxApprovers
	// CanonicalSHA256 is the card's (spec profile): approvals are for
	// exactly these bytes.
	CanonicalSHA256 []byte
	CardName        string
	CardVersion     string
	AgentID         string // the registry agent the card is registered under; "" when not registered
	// Request is the card as the requester sent it (approvers read it),
	// opaque to the store; at most MaxApprovalRequestBytes.
	Request []byte
	// Diff is what the card changes against the agent's previous card, as
	// JSON for `cardsign approvals show`; opaque to the store; at most
	// MaxApprovalDiffBytes.
	Diff  string
	State string // ApprovalPending, ApprovalApproved or ApprovalDenied
	Votes []Vote // in the order given
	// Seq is the audit sequence number of the approval.request record.
	Seq int64
}

// Vote is one approver's step on an approval.
type Vote struct {
	Approver string
	Time     time.Time // UTC, set by the store
	Approve  bool      // false: a denial
	Reason   string
	Seq      int64 // its audit record's sequence number, set by the store
}

// Approvals counts the approving votes.
func (a Approval) Approvals() int {
	n := 0
	for _, v := range a.Votes {
		if v.Approve {
			n++
		}
	}
	return n
}

// Expired reports whether a is past its expiry at now, whatever its state:
// an expired approval can be neither voted on nor used.
func (a Approval) Expired(now time.Time) bool { return !now.Before(a.ExpiresAt) }

// ApprovalFilter selects approvals for ListApprovals.
type ApprovalFilter struct {
	// State is "" for every state; ApprovalPending and ApprovalApproved
	// select those not expired at Now, ApprovalExpired those expired at Now
	// and not denied, ApprovalDenied the denied ones.
	State     string
	Now       time.Time // decides expiry; required with State pending, approved or expired
	Requester string    // "" for every requester
	Before    string    // page: only approvals created before the one with this id (which must exist); "" from the newest
	Limit     int       // at most this many; <= 0 means 100
}

// Limits of a stored approval.
const (
	MaxApprovers            = 16
	MaxApprovalRequestBytes = 16 << 20 // limits.max_card_bytes at most
	MaxApprovalDiffBytes    = 256 << 10
	maxApprovalText         = 1024
)

// The errors VoteApproval returns, which callers branch on.
var (
	// ErrApprovalClosed: the approval is denied, already approved, or
	// expired (at the store's clock); no vote is taken.
	ErrApprovalClosed = errors.New("store: approval is closed")
	// ErrDuplicateVote: this approver has voted on this approval already.
	ErrDuplicateVote = errors.New("store: approver has voted already")
	// ErrSelfApproval: the approver is the requester.
	ErrSelfApproval = errors.New("store: the requester cannot vote on their own approval")
)

// Approvals keeps signing requests held for approval and their votes. Every
// change appends its audit record in the same transaction, as
// Agents.RevokeCard does.
type Approvals interface {
	// CreateApproval stores a as a new pending approval (its State and Votes
	// are ignored, CreatedAt is set by the store) and appends rec, its
	// audit.KindApprovalRequest record, in one transaction. It returns both
	// as stored (a.Seq is rec's). An ID that exists fails with ErrExists.
	CreateApproval(ctx context.Context, a Approval, rec audit.Record) (Approval, audit.Record, error)

	// Approval returns approval id, or an error wrapping ErrNotFound.
	Approval(ctx context.Context, id string) (Approval, error)

	// ListApprovals returns the approvals f selects, newest first, with
	// their votes but without their Request (a page does not carry the
	// cards; Approval does).
	ListApprovals(ctx context.Context, f ApprovalFilter) ([]Approval, error)

	// VoteApproval adds v (Time and Seq set by the store) to approval id and
	// appends its audit record in one transaction. It fails with
	// ErrApprovalClosed when the approval is not pending or has expired at
	// the store's clock, ErrDuplicateVote when v.Approver voted on it
	// before, ErrSelfApproval when v.Approver is its requester, an error
	// wrapping ErrNotFound when there is none. Otherwise a denial makes it
	// ApprovalDenied and the Required-th approval ApprovalApproved; then
	// record is called, inside the transaction, with the approval as it is
	// after the vote, and its record (KindApprovalApprove or
	// KindApprovalDeny) is appended. A record error is returned as is and
	// nothing is written. It returns the approval and the record as stored.
	VoteApproval(ctx context.Context, id string, v Vote, record func(after Approval) (audit.Record, error)) (Approval, audit.Record, error)
}

// CheckApproval refuses an approval no daemon makes, for both SQL stores'
// CreateApproval: the field and the rule in the error.
func CheckApproval(a Approval) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("store: approval %s: %s", field, fmt.Sprintf(format, args...))
	}
	text := func(s string) bool {
		return len(s) <= maxApprovalText && utf8.ValidString(s) && !strings.ContainsAny(s, "\x00")
	}
	switch {
	case a.ID == "" || len(a.ID) > 64 || strings.ContainsAny(a.ID, " /\n\x00"):
		return bad("id", "%q: want 1 to 64 characters without space, slash or newline", a.ID)
	case a.Requester == "" || !text(a.Requester):
		return bad("requester", "want 1 to %d bytes of UTF-8", maxApprovalText)
	case a.Rule == "" || !text(a.Rule):
		return bad("rule", "want 1 to %d bytes of UTF-8", maxApprovalText)
	case !text(a.Group) || !text(a.RequestID) || !text(a.CardName) || !text(a.CardVersion) || !text(a.AgentID):
		return bad("text", "group, request id, card name, card version and agent id: want at most %d bytes of UTF-8 each", maxApprovalText)
	case a.Required < 1 || a.Required > MaxApprovers:
		return bad("required", "%d: want 1 to %d", a.Required, MaxApprovers)
	case len(a.CanonicalSHA256) != 32:
		return bad("canonical_sha256", "%d bytes, want 32", len(a.CanonicalSHA256))
	case len(a.Request) == 0 || len(a.Request) > MaxApprovalRequestBytes:
		return bad("request", "%d bytes: want 1 to %d", len(a.Request), MaxApprovalRequestBytes)
	case len(a.Diff) > MaxApprovalDiffBytes:
		return bad("diff", "%d bytes: want at most %d", len(a.Diff), MaxApprovalDiffBytes)
	case a.ExpiresAt.IsZero():
		return bad("expires_at", "not set")
	}
	return nil
}

// CheckVote refuses a vote no daemon casts, for both SQL stores'
// VoteApproval.
func CheckVote(v Vote) error {
	switch {
	case v.Approver == "" || len(v.Approver) > maxApprovalText || !utf8.ValidString(v.Approver):
		return fmt.Errorf("store: vote approver: want 1 to %d bytes of UTF-8", maxApprovalText)
	case len(v.Reason) > maxApprovalText || !utf8.ValidString(v.Reason):
		return fmt.Errorf("store: vote reason: want at most %d bytes of UTF-8", maxApprovalText)
	}
	return nil
}

// ApplyVote is VoteApproval's decision for both SQL stores, given the
// approval as the transaction read it and the store's now: the approval
// after the vote, or ErrApprovalClosed, ErrDuplicateVote or
// ErrSelfApproval.
func ApplyVote(a Approval, v Vote, now time.Time) (Approval, error) {
	switch {
	case a.State != ApprovalPending:
		return a, fmt.Errorf("%w: it is %s", ErrApprovalClosed, a.State)
	case a.Expired(now):
		return a, fmt.Errorf("%w: it expired at %s", ErrApprovalClosed, a.ExpiresAt.UTC().Format(time.RFC3339))
	case v.Approver == a.Requester:
		return a, ErrSelfApproval
	}
	for _, old := range a.Votes {
		if old.Approver == v.Approver {
			return a, ErrDuplicateVote
		}
	}
	v.Time = now.UTC()
	a.Votes = append(append([]Vote(nil), a.Votes...), v)
	switch {
	case !v.Approve:
		a.State = ApprovalDenied
	case a.Approvals() >= a.Required:
		a.State = ApprovalApproved
	}
	return a, nil
}

// ApprovalImporter is a Store that takes approvals as they are, with their
// votes, times, states and audit sequence numbers: what copying a store
// needs (cardsignd store copy), whose audit records are copied apart.
type ApprovalImporter interface {
	// ImportApproval stores a and its votes; an approval already stored
	// is left as it is, so an interrupted copy can run again.
	ImportApproval(ctx context.Context, a Approval) error
}
