package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/cel"

	"github.com/cardsign/cardsign/glob"
)

// condition is a compiled condition rule.
type condition struct {
	name       string
	identities []string
	roles      []string
	when       string
	prg        cel.Program
	outcome    Outcome
	message    string
	count      int
	group      string
	ttl        time.Duration
}

// compileCondition validates and compiles rule r (at path at) as a
// condition rule.
func compileCondition(env *cel.Env, at string, r Rule, groups map[string][]string, add func(path, format string, args ...any)) (condition, bool) {
	ok := true
	fail := func(path, format string, args ...any) {
		add(path, format, args...)
		ok = false
	}
	if r.When == "" {
		fail(at+".when", "outcome, message and approvals belong to a condition rule, which needs when (a CEL expression); a rule without when is a permission rule")
	}
	for field, set := range map[string]bool{"card_names": len(r.CardNames) > 0, "hosts": len(r.Hosts) > 0, "claims": len(r.Claims) > 0, "agent_ids": len(r.AgentIDs) > 0, "require_https": r.RequireHTTPS != nil} {
		if set {
			fail(at+"."+field, "a condition rule (with when) decides by its expression alone; write this check in when, or make it a permission rule of its own")
		}
	}
	for j, s := range r.Identities {
		if msg := checkGlob(s); msg != "" {
			fail(fmt.Sprintf("%s.identities[%d]", at, j), "identity pattern %s", msg)
		}
	}
	for j, s := range r.Roles {
		if !knownRole(s) {
			fail(fmt.Sprintf("%s.roles[%d]", at, j), "unknown role %q (roles are signer, admin, auditor, reader, approver)", s)
		}
	}
	c := condition{name: r.Name, identities: slices.Clone(r.Identities), roles: slices.Clone(r.Roles), when: r.When, outcome: r.Outcome, message: r.Message}
	switch r.Outcome {
	case OutcomeAllow, OutcomeDeny:
		if r.Approvals != nil {
			fail(at+".approvals", "only a require_approval rule takes approvals")
		}
	case OutcomeRequireApproval:
		c.count = 1
		if a := r.Approvals; a != nil {
			if a.Count != 0 {
				c.count = a.Count
			}
			c.group, c.ttl = a.Group, a.TTL
		}
		if c.ttl != 0 && (c.ttl < time.Second || c.ttl > MaxApprovalTTL) {
			fail(at+".approvals.ttl", "%s: want 1s to %s (unset: policy.approval_ttl)", c.ttl, MaxApprovalTTL)
		}
		if c.count < 1 || c.count > MaxApprovers {
			fail(at+".approvals.count", "%d: want 1 to %d", c.count, MaxApprovers)
		}
		if _, known := groups[c.group]; c.group != "" && !known {
			fail(at+".approvals.group", "no group %q in policy.groups", c.group)
		}
	case "":
		fail(at+".outcome", "missing: allow, deny or require_approval")
	default:
		fail(at+".outcome", "%q: want allow, deny or require_approval", r.Outcome)
	}
	if len(r.Message) > maxMessage || strings.ContainsFunc(r.Message, isControl) {
		fail(at+".message", "want at most %d bytes without control characters", maxMessage)
	}
	if r.When != "" {
		prg, err := compileWhen(env, r.When)
		if err != nil {
			fail(at+".when", "rule %s: expression %v", quote(r.Name), err)
		}
		c.prg = prg
	}
	return c, ok
}

// MaxApprovers bounds a require_approval rule's count.
const MaxApprovers = 16

// maxMessage bounds a condition rule's message.
const maxMessage = 512

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// checkName returns why s is not a usable group name, or "".
func checkName(s string) string {
	if s == "" || len(s) > 64 || strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		return fmt.Sprintf("%q: want 1 to 64 of a-z 0-9 - _", s)
	}
	return ""
}

// appliesTo: a condition rule without identities or roles applies to
// every caller.
func (c *condition) appliesTo(caller Caller) bool {
	return len(c.identities) == 0 && len(c.roles) == 0 || matchesCaller(c.identities, c.roles, caller)
}

// Decision is what the condition rules decide about a card the permission
// rules allow.
type Decision struct {
	// Outcome is OutcomeAllow when no condition rule's when holds.
	Outcome Outcome
	// Rule is the rule that decided; "" for the default (allow).
	Rule string
	// Message is the rule's message ("" for none).
	Message string
	// Approvals and Group are a require_approval rule's.
	Approvals int
	Group     string
	// TTL is how long the approval lives (the rule's, else the policy's).
	TTL time.Duration
	// Trace says, for each condition rule in order, what it did:
	// "not for this caller", "false", "true" or "error: …", up to the rule
	// that decided (cardsign policy test prints it).
	Trace []Step
}

// Step is one condition rule's part in a decision.
type Step struct{ Rule, Result string }

// EvalError is a condition rule whose expression could not be evaluated:
// the card is refused (fail closed).
type EvalError struct {
	Rule string
	Err  error
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("signing policy: rule %s could not be evaluated, so the card is refused (fail closed): %v", quote(e.Rule), e.Err)
}

func (e *EvalError) Unwrap() error { return e.Err }

// Conditional reports whether the policy has condition rules (so a
// decision needs the card's previous version and diff).
func (p *Policy) Conditional() bool { return p != nil && len(p.conds) > 0 }

// Decide runs the condition rules, in configuration order, over a card the
// permission rules (Check) allowed: the first that applies to the caller
// and whose when is true decides its outcome. With none true, the card is
// allowed. An expression that fails to evaluate (a missing key, a type
// mismatch, the cost or time limit) refuses the card with an *EvalError;
// when ctx ends first, its error is returned instead.
func (p *Policy) Decide(ctx context.Context, in Input) (Decision, error) {
	d := Decision{Outcome: OutcomeAllow}
	if !p.Conditional() {
		return d, nil
	}
	act := newActivation(in, p.adapter)
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, EvalTimeout)
	defer cancel()
	for i := range p.conds {
		c := &p.conds[i]
		if !c.appliesTo(in.Caller) {
			d.Trace = append(d.Trace, Step{c.name, "not for this caller"})
			continue
		}
		hit, err := eval(ctx, c.prg, act)
		if err != nil && parent.Err() != nil {
			// The caller gave up: no rule is to blame.
			return d, parent.Err()
		}
		if err != nil {
			d.Trace = append(d.Trace, Step{c.name, "error: " + err.Error()})
			d.Outcome, d.Rule = OutcomeDeny, c.name
			return d, &EvalError{Rule: c.name, Err: err}
		}
		if !hit {
			d.Trace = append(d.Trace, Step{c.name, "false"})
			continue
		}
		d.Trace = append(d.Trace, Step{c.name, "true"})
		d.Outcome, d.Rule, d.Message, d.Approvals, d.Group, d.TTL = c.outcome, c.name, c.message, c.count, c.group, c.ttl
		if d.Outcome == OutcomeRequireApproval && d.TTL == 0 {
			d.TTL = p.ApprovalTTL()
		}
		return d, nil
	}
	return d, nil
}

// Refusal is the refusal of a deny decision.
func (d Decision) Refusal() *Refusal {
	msg := d.Message
	if msg == "" {
		msg = "the rule's condition holds for this card"
	}
	return &Refusal{Rule: d.Rule, Path: "when", Reason: msg}
}

// ApprovalTTL is how long a request held for approval lives.
func (p *Policy) ApprovalTTL() time.Duration {
	if p == nil || p.approvalTTL == 0 {
		return DefaultApprovalTTL
	}
	return p.approvalTTL
}

// MayApprove decides whether approver may approve a request held by rule
// (whose approvals named group, "" for any): the approver role, membership
// of the group, and never the requester.
func (p *Policy) MayApprove(approver Caller, requester, group string) error {
	switch {
	case !slices.Contains(approver.Roles, "approver"):
		return fmt.Errorf("caller %s does not hold the approver role", quote(approver.Identity))
	case approver.Identity == requester:
		return fmt.Errorf("caller %s asked for this signature and cannot approve it: approvals come from a second pair of eyes", quote(approver.Identity))
	}
	if group == "" {
		return nil
	}
	var members []string
	if p != nil {
		members = p.groups[group]
	}
	if !slices.ContainsFunc(members, func(pat string) bool { return glob.Match(pat, approver.Identity) }) {
		return fmt.Errorf("caller %s is not in approver group %q", quote(approver.Identity), group)
	}
	return nil
}
