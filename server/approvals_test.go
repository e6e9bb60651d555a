package server

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/approval"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/store"
)

// approvalsAuthority is an authority over a real SQLite store whose policy
// holds every card that adds a skill (2 approvers of group security),
// refuses test versions, and has a rule that cannot be evaluated for cards
// without a provider.
func approvalsAuthority(t *testing.T) *Authority {
	t.Helper()
	pol, probs := policy.Compile(policy.Config{
		Groups: map[string][]string{"security": {"token:alice", "token:bob", "token:ci"}},
		Rules: []policy.Rule{
			{Name: "no-test", When: "card.version.endsWith('-test')", Outcome: policy.OutcomeDeny, Message: "test builds are not signed"},
			{Name: "provider", When: "card.version == '9' && card.provider.organization == 'x'", Outcome: policy.OutcomeDeny},
			{Name: "new-skill", When: "!diff.first && size(diff.skills_added) > 0", Outcome: policy.OutcomeRequireApproval,
				Approvals: &policy.ApprovalRule{Count: 2, Group: "security"}},
		},
	})
	if probs != nil {
		t.Fatal(probs)
	}
	dir := t.TempDir()
	return newAuthorityWith(t, openStore(t, dir), dir, slog.New(slog.DiscardHandler), func(c *Config) { c.Policy = pol })
}

func caller(name string, roles ...access.Role) access.Identity {
	return access.Identity{Name: name, Method: access.MethodToken, Roles: roles}
}

// withSkill is the security sample card (no provider) at version, with one
// more skill when skill is set.
func withSkill(t *testing.T, version, skill string) []byte {
	t.Helper()
	c := string(testsupport.Card(t, "security.json"))
	c = strings.Replace(c, `"version": "1.4.2"`, `"version": "`+version+`"`, 1)
	c = strings.Replace(c, `"provider": {"organization": "Example Security Ltd", "url": "https://security.example.com"},`, "", 1)
	if skill != "" {
		c = strings.Replace(c, `"skills": [`, `"skills": [{"id": "`+skill+`", "name": "N", "description": "D", "tags": ["t"]}, `, 1)
	}
	return []byte(c)
}

// TestApprovalGate: a card the condition rules hold is stored with its
// audit record and answered with its approval; votes follow the rules
// (approver role, group, never the requester, once each); the requester
// signs the approved bytes under it, and nothing else.
func TestApprovalGate(t *testing.T) {
	a := approvalsAuthority(t)
	ctx := t.Context()
	ci := caller("token:ci", access.RoleSigner, access.RoleApprover)
	sign := func(card []byte, approval string) (*Signed, error) {
		return a.Sign(ctx, SignRequest{Card: card, Caller: ci.Name, Identity: ci, RequestID: "r", Registration: &Registration{AgentID: "orders"}, ApprovalID: approval})
	}
	if _, err := sign(withSkill(t, "1", ""), ""); err != nil {
		t.Fatalf("first version: %v", err)
	}
	v2 := withSkill(t, "2", "refund")
	_, err := sign(v2, "")
	var held *approval.RequiredError
	if !errors.As(err, &held) || held.Approval.Rule != "new-skill" || held.Approval.Required != 2 || held.Approval.State != store.ApprovalPending {
		t.Fatalf("a new skill: %v; want an ApprovalRequiredError of rule new-skill", err)
	}
	id := held.Approval.ID
	if !strings.HasPrefix(id, "apr_") || held.Approval.Seq == 0 {
		t.Fatalf("approval %+v: want an apr_ id and its audit record", held.Approval)
	}
	// Sent again (a pipeline re-run): the same request, not a second one.
	if _, err := sign(v2, ""); !errors.As(err, &held) || held.Approval.ID != id {
		t.Fatalf("the same card again: %v; want approval %s again", err, id)
	}
	// Under another agent: not this approval (its approvers reviewed the
	// diff against orders' card).
	if _, err := a.Sign(ctx, SignRequest{Card: withSkill(t, "1", ""), Caller: ci.Name, Identity: ci, RequestID: "r", Registration: &Registration{AgentID: "orders-eu"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Sign(ctx, SignRequest{Card: v2, Caller: ci.Name, Identity: ci, RequestID: "r", Registration: &Registration{AgentID: "orders-eu"}, ApprovalID: id}); !errors.As(err, new(*approval.UnusableError)) || !strings.Contains(err.Error(), `not agent "orders-eu"`) {
		t.Fatalf("the approval used for another agent: %v", err)
	}
	desk := a.approvals
	votes := []struct {
		name string
		who  access.Identity
		want string
	}{
		{"no approver role", caller("token:alice", access.RoleSigner), "approver role"},
		{"not in the group", caller("token:mallory", access.RoleApprover), "not in approver group"},
		{"the requester", ci, "cannot approve it"},
	}
	for _, v := range votes {
		_, _, err := desk.Vote(ctx, approval.Voter{Identity: v.who}, id, true, "", nil)
		var fe *approval.ForbiddenError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), v.want) {
			t.Fatalf("%s: %v; want a ForbiddenError containing %q", v.name, err, v.want)
		}
	}
	alice, bob := caller("token:alice", access.RoleApprover), caller("token:bob", access.RoleApprover)
	if _, _, err := desk.Vote(ctx, approval.Voter{Identity: alice}, id, true, "ok", []byte("not the digest")); !errors.As(err, new(*approval.UnusableError)) {
		t.Fatalf("a vote for other bytes: %v", err)
	}
	after, rec, err := desk.Vote(ctx, approval.Voter{Identity: alice}, id, true, "ok", held.Approval.CanonicalSHA256)
	if err != nil || after.State != store.ApprovalPending || rec.Kind() != audit.KindApprovalApprove || rec.Caller != "token:alice" || rec.CardName != "" {
		t.Fatalf("alice's vote: %+v %+v %v", after, rec, err)
	}
	if _, _, err := desk.Vote(ctx, approval.Voter{Identity: alice}, id, true, "", nil); !errors.As(err, new(*approval.UnusableError)) || !strings.Contains(err.Error(), "voted already") {
		t.Fatalf("alice again: %v", err)
	}
	if _, err := sign(v2, id); !errors.As(err, &held) {
		t.Fatalf("signing under a pending approval: %v; want it held still", err)
	}
	if after, _, err = desk.Vote(ctx, approval.Voter{Identity: bob}, id, true, "", nil); err != nil || after.State != store.ApprovalApproved {
		t.Fatalf("bob's vote: %+v %v", after, err)
	}
	// Other bytes, or another caller, cannot use it.
	if _, err := sign(withSkill(t, "2", "refunds"), id); !errors.As(err, new(*approval.UnusableError)) || !strings.Contains(err.Error(), "exact bytes") {
		t.Fatalf("other bytes under the approval: %v", err)
	}
	other := caller("token:other", access.RoleSigner)
	if _, err := a.Sign(ctx, SignRequest{Card: v2, Caller: other.Name, Identity: other, RequestID: "r", Registration: &Registration{AgentID: "orders"}, ApprovalID: id}); !errors.As(err, new(*approval.UnusableError)) {
		t.Fatalf("another caller under the approval: %v", err)
	}
	signed, err := sign(v2, id)
	if err != nil || signed.Agent == nil || signed.Agent.Version != 2 {
		t.Fatalf("signing under the approval: %+v %v", signed, err)
	}
	recs, err := a.store.ListAudit(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range recs {
		if r.Kind().IsApproval() {
			kinds = append(kinds, string(r.Kind())+" "+r.Caller)
		}
	}
	if got := strings.Join(kinds, ", "); got != "approval.request token:ci, approval.approve token:alice, approval.approve token:bob" {
		t.Fatalf("approval records: %s", got)
	}
}

// TestApprovalGateRefusals: a deny rule and a rule that cannot be
// evaluated refuse the card, each an audited refusal naming the rule; a
// denied approval cannot be used.
func TestApprovalGateRefusals(t *testing.T) {
	a := approvalsAuthority(t)
	ctx := t.Context()
	ci := caller("token:ci", access.RoleSigner)
	sign := func(card []byte, approval string) error {
		_, err := a.Sign(ctx, SignRequest{Card: card, Caller: ci.Name, Identity: ci, RequestID: "r", Registration: &Registration{AgentID: "orders"}, ApprovalID: approval})
		return err
	}
	for _, tc := range []struct {
		name, version, want string
	}{
		{"deny rule", "1.0-test", `rule "no-test" refuses when: test builds are not signed`},
		{"evaluation error", "9", `rule "provider" refuses when: the rule could not be evaluated, so the card is refused (fail closed)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sign(withSkill(t, tc.version, ""), "")
			var refused *RefusedError
			if !errors.As(err, &refused) || refused.Seq == 0 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want an audited refusal containing %q", err, tc.want)
			}
		})
	}
	if err := sign(withSkill(t, "1", ""), ""); err != nil {
		t.Fatal(err)
	}
	err := sign(withSkill(t, "2", "refund"), "")
	var held *approval.RequiredError
	if !errors.As(err, &held) {
		t.Fatal(err)
	}
	if _, _, err := a.approvals.Vote(ctx, approval.Voter{Identity: caller("token:bob", access.RoleApprover)}, held.Approval.ID, false, "no", nil); err != nil {
		t.Fatal(err)
	}
	if err := sign(withSkill(t, "2", "refund"), held.Approval.ID); !errors.As(err, new(*approval.UnusableError)) || !strings.Contains(err.Error(), `denied by "token:bob": "no"`) {
		t.Fatalf("signing under a denied approval: %v", err)
	}
}
