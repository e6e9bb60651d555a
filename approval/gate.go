package approval

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/carddiff"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
)

// Request is a signing request the permission rules allowed, as the
// condition rules and the approvals see it.
type Request struct {
	Identity  access.Identity
	RequestID string
	// Card is the card as sent (approvers read it); Value the card in its
	// v1.0 shape; Digest the SHA-256 of its spec-profile canonical bytes.
	Card   []byte
	Value  strictjson.Value
	Digest [32]byte
	// AgentID is the registration's agent, "" when the card is not
	// registered; Visibility the registration's.
	AgentID    string
	Visibility string
	Profile    string
	// ApprovalID is the approval the card is signed under, if any.
	ApprovalID string
	// Record is the request's audit record as the caller writes it for this
	// card (time, caller, card, hosts, sealing); Gate makes the
	// approval.request record of it.
	Record audit.Record
}

// Gate runs the condition rules over r. It returns nil when the card may
// be signed now; a *policy.Refusal when a rule denies it or cannot be
// evaluated (the caller audits the refusal); a *RequiredError for a new or
// still pending approval; an *UnusableError or *InvalidError for an
// approval that cannot be used; or another error (the store, the previous
// card, the caller gone), which decides nothing.
func (d *Desk) Gate(ctx context.Context, r Request) error {
	pol := d.cfg.Policy
	if !pol.Conditional() {
		return nil
	}
	in, err := d.input(ctx, r)
	if err != nil {
		return err
	}
	dec, err := pol.Decide(ctx, in)
	if ee := (*policy.EvalError)(nil); errors.As(err, &ee) {
		d.cfg.Log.Warn("signing policy rule could not be evaluated; card refused", "rule", ee.Rule, "request_id", r.RequestID, "err", ee.Err)
		return &policy.Refusal{Rule: ee.Rule, Path: "when", Reason: "the rule could not be evaluated, so the card is refused (fail closed): " + ee.Err.Error()}
	}
	if err != nil {
		return err
	}
	switch dec.Outcome {
	case policy.OutcomeDeny:
		return dec.Refusal()
	case policy.OutcomeRequireApproval:
	default:
		return nil
	}
	if r.ApprovalID != "" {
		if err := CheckID("approval_id", r.ApprovalID); err != nil {
			return err
		}
		held, err := d.cfg.Store.Approval(ctx, r.ApprovalID)
		if err != nil && !isNotFound(err) {
			return unavailable(err)
		}
		if err == nil {
			ok, err := usable(held, r, dec, d.cfg.Now())
			if ok || err != nil {
				return err
			}
		}
		// Not found, or held under another rule (the policy changed):
		// ask again.
	}
	// The same card sent again (a pipeline re-run) waits on the request
	// already held, rather than asking the approvers twice.
	if held, ok, err := d.heldAlready(ctx, r, dec); err != nil || ok {
		if err != nil {
			return err
		}
		return &RequiredError{Approval: held, Message: dec.Message}
	}
	return d.hold(ctx, r, in.Diff, dec)
}

// input gathers what the condition rules see: the card, the agent's latest
// registered card and what this one changes.
func (d *Desk) input(ctx context.Context, r Request) (policy.Input, error) {
	agent := r.AgentID
	if agent == "" && d.cfg.AgentOf != nil {
		agent = d.cfg.AgentOf(r.Value)
	}
	var previous strictjson.Value
	if agent != "" {
		var err error
		if previous, err = d.cfg.Previous(ctx, agent); err != nil {
			return policy.Input{}, err
		}
	}
	card := carddiff.Unsigned(r.Value)
	previous = carddiff.Unsigned(previous)
	return policy.Input{
		Caller:   Caller(r.Identity),
		Card:     card,
		Previous: previous,
		Diff:     carddiff.Compute(card, previous),
		Request:  policy.Request{AgentID: agent, Register: r.AgentID != "", Visibility: r.Visibility, Profile: r.Profile},
	}, nil
}

// usable decides whether approval held lets r sign now: true when it is
// approved for these bytes, this requester and this agent; an error for
// one that cannot be used; false, nil when it was asked for under another
// rule.
func usable(held store.Approval, r Request, dec policy.Decision, now time.Time) (bool, error) {
	fail := func(format string, args ...any) (bool, error) {
		return false, &UnusableError{Reason: fmt.Sprintf("approval %s: ", held.ID) + fmt.Sprintf(format, args...)}
	}
	switch {
	case held.Requester != r.Identity.Name:
		return fail("it was asked for by %s, not by %s: only its requester signs under it", strictjson.QuoteForMessage(held.Requester), strictjson.QuoteForMessage(r.Identity.Name))
	case !bytes.Equal(held.CanonicalSHA256, r.Digest[:]):
		return fail("it approves the card with canonical SHA-256 %s, and this card's is %s: approvals are for exact bytes; sign without --approval to ask for a new one",
			hex.EncodeToString(held.CanonicalSHA256), hex.EncodeToString(r.Digest[:]))
	case held.AgentID != r.AgentID:
		// Approvers reviewed the diff against that agent's card, and where
		// the card would be registered.
		return fail("it was asked for %s, not %s: sign with the same --register and --agent, or without --approval to ask for a new one",
			agentNamed(held.AgentID), agentNamed(r.AgentID))
	case !sameRule(held, dec):
		return false, nil
	case held.State == store.ApprovalDenied:
		return fail("denied by %s", lastVoter(held))
	case held.Expired(now):
		return fail("expired at %s; sign without --approval to ask for a new one", held.ExpiresAt.UTC().Format(time.RFC3339))
	case held.State == store.ApprovalPending:
		return false, &RequiredError{Approval: held, Message: dec.Message}
	}
	return true, nil
}

// sameRule reports whether held was asked for under the rule as it decides
// now: the same rule, asking no more approvals and the same group. A rule
// made stricter (more approvals, another group) asks again: approvals given
// under the laxer rule do not sign under the stricter one.
func sameRule(held store.Approval, dec policy.Decision) bool {
	return held.Rule == dec.Rule && held.Required >= dec.Approvals && held.Group == dec.Group
}

func agentNamed(id string) string {
	if id == "" {
		return "signing without registering"
	}
	return "agent " + strictjson.QuoteForMessage(id)
}

func lastVoter(a store.Approval) string {
	if len(a.Votes) == 0 {
		return "nobody"
	}
	v := a.Votes[len(a.Votes)-1]
	s := strictjson.QuoteForMessage(v.Approver)
	if v.Reason != "" {
		s += ": " + strictjson.QuoteForMessage(v.Reason)
	}
	return s
}

// heldAlready finds the requester's pending, unexpired approval of these
// bytes, for this agent, under this rule.
func (d *Desk) heldAlready(ctx context.Context, r Request, dec policy.Decision) (store.Approval, bool, error) {
	list, err := d.cfg.Store.ListApprovals(ctx, store.ApprovalFilter{State: store.ApprovalPending, Requester: r.Identity.Name, Now: d.cfg.Now(), Limit: 1000})
	if err != nil {
		return store.Approval{}, false, unavailable(err)
	}
	for _, held := range list {
		if bytes.Equal(held.CanonicalSHA256, r.Digest[:]) && held.AgentID == r.AgentID && sameRule(held, dec) {
			return held, true, nil
		}
	}
	return store.Approval{}, false, nil
}

// hold stores a new approval for the card with its audit record and
// answers with it.
func (d *Desk) hold(ctx context.Context, r Request, diff carddiff.Diff, dec policy.Decision) error {
	diffJSON, err := diff.MarshalJSON()
	if err != nil {
		return fmt.Errorf("approval diff: %w", err)
	}
	name, _ := r.Value.Get("name")
	version, _ := r.Value.Get("version")
	held := store.Approval{
		ID: NewID(), ExpiresAt: d.cfg.Now().Add(dec.TTL),
		Requester: r.Identity.Name, RequestID: r.RequestID, Rule: dec.Rule, Group: dec.Group, Required: dec.Approvals,
		CanonicalSHA256: r.Digest[:], CardName: name.Str, CardVersion: version.Str, AgentID: r.AgentID,
		Request: r.Card, Diff: string(diffJSON),
	}
	if err := store.CheckApproval(held); err != nil {
		// A card the store cannot hold for approval (a diff too large, a
		// name with NUL): it can never be approved, so say so.
		return &InvalidError{Field: "card", Reason: fmt.Sprintf("it cannot be held for approval under rule %q: %v", dec.Rule, err)}
	}
	rec := r.Record
	rec.Outcome, rec.Reason, rec.Detail = string(audit.KindApprovalRequest), dec.Message, Detail(held)
	stored, committed, err := d.cfg.Store.CreateApproval(ctx, held, rec)
	if err != nil {
		return unavailable(fmt.Errorf("approval request not recorded: %w", err))
	}
	d.cfg.Committed(committed)
	d.cfg.Count("requested")
	d.cfg.Log.Info("signature held for approval", "approval", stored.ID, "rule", dec.Rule, "caller", rec.Caller, "request_id", r.RequestID, "audit_seq", committed.Seq)
	return &RequiredError{Approval: stored, Message: dec.Message}
}
