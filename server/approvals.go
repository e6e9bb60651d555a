package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/carddiff"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
)

// ApprovalRequiredError is a card a signing policy condition rule holds
// until approvers approve it: the approval to wait for.
type ApprovalRequiredError struct {
	Approval store.Approval
	Message  string // the rule's message
}

func (e *ApprovalRequiredError) Error() string {
	a := e.Approval
	msg := fmt.Sprintf("signing policy: rule %q requires %d approval(s)", a.Rule, a.Required)
	if a.Group != "" {
		msg += fmt.Sprintf(" from group %q", a.Group)
	}
	if e.Message != "" {
		msg += ": " + strictjson.QuoteForMessage(e.Message)
	}
	return fmt.Sprintf("%s; approval %s holds %d of %d, expires %s (audit record %d): approvers run `cardsign approvals approve %s`; then sign again with --approval %s, or wait with --wait",
		msg, a.ID, a.Approvals(), a.Required, a.ExpiresAt.UTC().Format(time.RFC3339), a.Seq, a.ID, a.ID)
}

// ForbiddenError is a caller who may not do what it asked (an approver
// outside the rule's group, the requester approving its own request).
type ForbiddenError struct{ Reason string }

func (e *ForbiddenError) Error() string { return e.Reason }

// gate runs the signing policy's condition rules over a card the
// permission rules allowed (id: the agent it is registered under, "" when
// it is not). It returns nil when the card may be signed now, an audited
// *RefusedError, or an *ApprovalRequiredError for a new or still pending
// approval.
func (x ApprovalsAPI) gate(ctx context.Context, req SignRequest, p *signer.Prepared, id string, hosts []string) error {
	a := x.a
	pol := a.cfg.Policy
	if !pol.Conditional() || req.resign {
		return nil
	}
	in, err := x.policyInput(ctx, req, p, id)
	if err != nil {
		return err
	}
	d, err := pol.Decide(ctx, in)
	refuse := func(r *policy.Refusal) error {
		rec := recordFor(a.now(), req, p, hosts)
		rec.Outcome, rec.Reason = audit.OutcomeRefused, r.Error()
		return a.auditRefusal(ctx, rec, r)
	}
	if ee := (*policy.EvalError)(nil); errors.As(err, &ee) {
		a.log.Warn("signing policy rule could not be evaluated; card refused", "rule", ee.Rule, "request_id", req.RequestID, "err", ee.Err)
		return refuse(&policy.Refusal{Rule: ee.Rule, Path: "when", Reason: "the rule could not be evaluated, so the card is refused (fail closed): " + ee.Err.Error()})
	}
	if err != nil {
		return err
	}
	switch d.Outcome {
	case policy.OutcomeDeny:
		return refuse(d.Refusal())
	case policy.OutcomeRequireApproval:
	default:
		return nil
	}
	if req.ApprovalID != "" {
		if err := checkApprovalID("approval_id", req.ApprovalID); err != nil {
			return err
		}
		held, err := a.store.Approval(ctx, req.ApprovalID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return &UnavailableError{What: "approvals", Err: err}
		}
		if err == nil {
			ok, err := usable(held, req, p, id, d, a.now())
			if ok || err != nil {
				return err
			}
		}
		// Not found, or held under another rule (the policy changed):
		// ask again.
	}
	// The same card sent again (a pipeline re-run) waits on the request
	// already held, rather than asking the approvers twice.
	if held, ok, err := x.heldAlready(ctx, req, p, id, d); err != nil || ok {
		if err != nil {
			return err
		}
		return &ApprovalRequiredError{Approval: held, Message: d.Message}
	}
	return x.hold(ctx, req, p, id, hosts, in.Diff, d)
}

// heldAlready finds the requester's pending, unexpired approval of these
// bytes, for this agent, under this rule.
func (x ApprovalsAPI) heldAlready(ctx context.Context, req SignRequest, p *signer.Prepared, id string, d policy.Decision) (store.Approval, bool, error) {
	list, err := x.a.store.ListApprovals(ctx, store.ApprovalFilter{State: store.ApprovalPending, Requester: req.Identity.Name, Now: x.a.now()})
	if err != nil {
		return store.Approval{}, false, &UnavailableError{What: "approvals", Err: err}
	}
	for _, held := range list {
		if bytes.Equal(held.CanonicalSHA256, p.CanonicalSHA256[:]) && held.AgentID == id && held.Rule == d.Rule {
			return held, true, nil
		}
	}
	return store.Approval{}, false, nil
}

// usable decides whether approval held lets req sign card p now: true when
// it is approved for these bytes; an error for one that cannot be used;
// false, nil when it was asked for under another rule.
func usable(held store.Approval, req SignRequest, p *signer.Prepared, agent string, d policy.Decision, now time.Time) (bool, error) {
	fail := func(format string, args ...any) (bool, error) {
		return false, &PreconditionError{Reason: fmt.Sprintf("approval %s: ", held.ID) + fmt.Sprintf(format, args...)}
	}
	switch {
	case held.Requester != req.Identity.Name:
		return fail("it was asked for by %s, not by %s: only its requester signs under it", strictjson.QuoteForMessage(held.Requester), strictjson.QuoteForMessage(req.Identity.Name))
	case !bytes.Equal(held.CanonicalSHA256, p.CanonicalSHA256[:]):
		return fail("it approves the card with canonical SHA-256 %s, and this card's is %s: approvals are for exact bytes; sign without --approval to ask for a new one",
			hex.EncodeToString(held.CanonicalSHA256), hex.EncodeToString(p.CanonicalSHA256[:]))
	case held.AgentID != agent:
		// Approvers reviewed the diff against that agent's card, and where
		// the card would be registered.
		return fail("it was asked for %s, not %s: sign with the same --register and --agent, or without --approval to ask for a new one",
			agentNamed(held.AgentID), agentNamed(agent))
	case held.Rule != d.Rule:
		return false, nil
	case held.State == store.ApprovalDenied:
		return fail("denied by %s", lastVoter(held))
	case held.Expired(now):
		return fail("expired at %s; sign without --approval to ask for a new one", held.ExpiresAt.UTC().Format(time.RFC3339))
	case held.State == store.ApprovalPending:
		return false, &ApprovalRequiredError{Approval: held, Message: d.Message}
	}
	return true, nil
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

// policyInput gathers what the condition rules see: the card, the agent's
// latest registered card and what this one changes.
func (x ApprovalsAPI) policyInput(ctx context.Context, req SignRequest, p *signer.Prepared, id string) (policy.Input, error) {
	a := x.a
	v := p.Loaded.Value
	register := id != ""
	if id == "" {
		id, _ = registry.DeriveAgentID(v)
	}
	var previous strictjson.Value
	if id != "" {
		prev, err := a.registry.Card(ctx, id, 0)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return policy.Input{}, &UnavailableError{What: "registry (the previous card a policy rule compares with)", Err: err}
		default:
			if previous, err = strictjson.Parse(prev.Input, strictjson.Limits{}); err != nil {
				return policy.Input{}, &UnavailableError{What: "registry (the previous card a policy rule compares with)", Err: err}
			}
		}
	}
	in := policy.Input{
		Caller:   policyCaller(req.Identity),
		Card:     v,
		Previous: previous,
		Diff:     carddiff.Compute(v, previous),
		Request:  policy.Request{AgentID: id, Register: register, Profile: string(req.Mode)},
	}
	if req.Registration != nil {
		in.Request.Visibility = string(req.Registration.Visibility)
	}
	return in, nil
}

// policyCaller is how the signing policy sees an identity.
func policyCaller(id access.Identity) policy.Caller {
	return policy.Caller{Identity: id.Name, Roles: id.RoleNames(), Claims: id.Claims, Method: string(id.Method), Provenance: id.Provenance}
}

// hold stores a new approval for the card with its audit record and
// answers with it.
func (x ApprovalsAPI) hold(ctx context.Context, req SignRequest, p *signer.Prepared, id string, hosts []string, diff carddiff.Diff, d policy.Decision) error {
	a := x.a
	now := a.now()
	diffJSON, err := diff.MarshalJSON()
	if err != nil {
		return fmt.Errorf("approval diff: %w", err)
	}
	name, _ := p.Loaded.Value.Get("name")
	version, _ := p.Loaded.Value.Get("version")
	held := store.Approval{
		ID: newApprovalID(), ExpiresAt: now.Add(d.TTL),
		Requester: req.Identity.Name, RequestID: req.RequestID, Rule: d.Rule, Group: d.Group, Required: d.Approvals,
		CanonicalSHA256: p.CanonicalSHA256[:], CardName: name.Str, CardVersion: version.Str, AgentID: id,
		Request: req.Card, Diff: string(diffJSON),
	}
	if err := store.CheckApproval(held); err != nil {
		// A card the store cannot hold for approval (a diff too large, a
		// name with NUL): it can never be approved, so say so.
		return &InvalidArgumentError{Field: "card", Reason: fmt.Sprintf("it cannot be held for approval under rule %q: %v", d.Rule, err)}
	}
	rec := recordFor(now, req, p, hosts)
	rec.Outcome, rec.Reason = string(audit.KindApprovalRequest), d.Message
	rec.Detail = approvalDetail(held)
	stored, committed, err := a.store.CreateApproval(ctx, held, rec)
	if err != nil {
		return fmt.Errorf("%w: approval request: %w", ErrAudit, err)
	}
	logged(a, committed)
	a.metrics.approvals.WithLabelValues("requested").Inc()
	a.log.Info("signature held for approval", "approval", stored.ID, "rule", d.Rule, "caller", req.Caller, "request_id", req.RequestID, "audit_seq", committed.Seq)
	return &ApprovalRequiredError{Approval: stored, Message: d.Message}
}

// logged tells the transparency log about a record the store committed
// with an action of its own.
func logged(a *Authority, rec audit.Record) {
	if a.tlog != nil {
		a.logCommitted([]audit.Record{rec})
	}
}

func approvalDetail(x store.Approval) string {
	return audit.EncodeApprovalDetail(audit.ApprovalDetail{
		ID: x.ID, Rule: x.Rule, Agent: x.AgentID, Approvals: x.Approvals(), Required: x.Required,
		Expires: audit.ApprovalExpiry(x.ExpiresAt),
	})
}

// checkApprovalID refuses what newApprovalID never makes, before the store
// sees it.
func checkApprovalID(field, id string) error {
	rest, ok := strings.CutPrefix(id, "apr_")
	if !ok || len(rest) != 26 || strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz234567") != "" {
		return &InvalidArgumentError{Field: field, Reason: fmt.Sprintf("%s is not an approval id (apr_ and 26 of a-z 2-7, as sign printed it)", strictjson.QuoteForMessage(id))}
	}
	return nil
}

// newApprovalID is "apr_" and 128 random bits in lower-case base32: an id
// nobody guesses, safe in a URL and a shell.
func newApprovalID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return "apr_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// ApprovalsAPI is the approvals desk as the gRPC ApprovalService serves
// it: listing, reading and voting, with who may do which.
type ApprovalsAPI struct{ a *Authority }

// NewApprovalsAPI is a's approvals desk for the gRPC services. A function,
// not a method: the Authority's methods are its own concerns.
func NewApprovalsAPI(a *Authority) ApprovalsAPI { return ApprovalsAPI{a} }

// readsAll reports whether who may read approvals other than its own.
func readsAll(who access.Identity) bool {
	return who.Has(access.RoleApprover) || who.Has(access.RoleAuditor) || who.Has(access.RoleAdmin)
}

// List returns the approvals f selects; a caller that is only a signer
// sees its own requests.
func (x ApprovalsAPI) List(ctx context.Context, who access.Identity, f store.ApprovalFilter) ([]store.Approval, error) {
	if !readsAll(who) {
		if f.Requester != "" && f.Requester != who.Name {
			return nil, &ForbiddenError{Reason: "a signer lists only its own approvals; approvers, auditors and admins list everyone's"}
		}
		f.Requester = who.Name
	}
	if f.Before != "" {
		// An unknown id would page to nothing, silently.
		if err := checkApprovalID("before", f.Before); err != nil {
			return nil, err
		}
		if _, err := x.a.store.Approval(ctx, f.Before); errors.Is(err, store.ErrNotFound) {
			return nil, &InvalidArgumentError{Field: "before", Reason: "no approval " + f.Before + " to page from"}
		} else if err != nil {
			return nil, err
		}
	}
	f.Now = x.a.now()
	return x.a.store.ListApprovals(ctx, f)
}

// Get returns approval id; a caller that is only a signer reads its own.
func (x ApprovalsAPI) Get(ctx context.Context, who access.Identity, id string) (store.Approval, error) {
	if err := checkApprovalID("id", id); err != nil {
		return store.Approval{}, err
	}
	ap, err := x.a.store.Approval(ctx, id)
	if err != nil {
		return store.Approval{}, err
	}
	if !readsAll(who) && ap.Requester != who.Name {
		// The same answer as for an id that does not exist: ids of others'
		// requests cannot be probed.
		return store.Approval{}, fmt.Errorf("approval %s: %w", id, store.ErrNotFound)
	}
	return ap, nil
}

// State is an approval's state as callers see it: "expired" for one past
// its expiry that was never denied.
func (x ApprovalsAPI) State(ap store.Approval) string {
	if ap.State != store.ApprovalDenied && ap.Expired(x.a.now()) {
		return "expired"
	}
	return ap.State
}

// Vote records who's approval (approve) or denial of approval id, with
// its audit record, after checking that who may vote on it; digest, when
// not nil, must be the approval's canonical SHA-256.
func (x ApprovalsAPI) Vote(ctx context.Context, who access.Identity, id string, approve bool, reason string, digest []byte) (store.Approval, audit.Record, error) {
	a := x.a
	if len(reason) > 1024 {
		return store.Approval{}, audit.Record{}, &InvalidArgumentError{Field: "reason", Reason: fmt.Sprintf("%d bytes, over the limit of 1024", len(reason))}
	}
	if err := checkApprovalID("id", id); err != nil {
		return store.Approval{}, audit.Record{}, err
	}
	ap, err := a.store.Approval(ctx, id)
	if err != nil {
		return store.Approval{}, audit.Record{}, err
	}
	if err := a.cfg.Policy.MayApprove(policyCaller(who), ap.Requester, ap.Group); err != nil {
		a.log.Warn("approval vote refused", "approval", id, "caller", who.Name, "err", err)
		a.metrics.approvals.WithLabelValues("refused").Inc()
		return store.Approval{}, audit.Record{}, &ForbiddenError{Reason: fmt.Sprintf("approval %s: %v", id, err)}
	}
	if digest != nil && !bytes.Equal(digest, ap.CanonicalSHA256) {
		return store.Approval{}, audit.Record{}, &PreconditionError{Reason: fmt.Sprintf("approval %s is for canonical SHA-256 %s, not %s: review it again", id, hex.EncodeToString(ap.CanonicalSHA256), hex.EncodeToString(digest))}
	}
	call := actorOf(ctx)
	if CallOf(ctx).Caller == "" {
		call.caller = who.Name // outside a call: the identity is the caller
	}
	kind := audit.KindApprovalDeny
	if approve {
		kind = audit.KindApprovalApprove
	}
	after, rec, err := a.store.VoteApproval(ctx, id, store.Vote{Approver: who.Name, Approve: approve, Reason: reason}, func(after store.Approval) (audit.Record, error) {
		// The card by its SHA-256 only: its name is in the request's
		// record, sealed there when the agent is private, and a vote's
		// log entry must not show it in the clear.
		return audit.Record{
			Time: a.now(), Caller: call.caller, RequestID: call.requestID, Provenance: call.provenance,
			CanonicalSHA256: after.CanonicalSHA256, Outcome: string(kind), Reason: reason, Detail: approvalDetail(after),
		}, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		a.metrics.approvals.WithLabelValues("refused").Inc()
	}
	switch {
	case errors.Is(err, store.ErrSelfApproval):
		return store.Approval{}, audit.Record{}, &ForbiddenError{Reason: fmt.Sprintf("approval %s: %s asked for it and cannot vote on it", id, strictjson.QuoteForMessage(who.Name))}
	case errors.Is(err, store.ErrApprovalClosed), errors.Is(err, store.ErrDuplicateVote):
		return store.Approval{}, audit.Record{}, &PreconditionError{Reason: fmt.Sprintf("approval %s: %v", id, err)}
	case err != nil:
		return store.Approval{}, audit.Record{}, err
	}
	logged(a, rec)
	step := "denied"
	if approve {
		step = "approved"
	}
	a.metrics.approvals.WithLabelValues(step).Inc()
	a.log.Info("approval vote", "approval", id, "approver", who.Name, "approve", approve, "state", after.State, "audit_seq", rec.Seq)
	return after, rec, nil
}
