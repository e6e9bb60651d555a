package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/strictjson"
)

// TestClaims: a rule (claims are checked in name order: ref before
// repository) with claims lets a pipeline sign only what its token's
// claims allow, and a refusal names the rule and the claim.
func TestClaims(t *testing.T) {
	p, probs := Compile(Config{Rules: []Rule{
		{Name: "payments-release", Roles: []string{"signer"}, CardNames: []string{"Payments Agent"}, Hosts: []string{"payments.example.com"},
			Claims: map[string]string{"repository": "acme/payments", "ref": "refs/tags/v*"}},
		{Name: "k8s-billing", Identities: []string{"oidc:https://kubernetes.default.svc#system:serviceaccount:billing:*"}, CardNames: []string{"Billing*"}, Hosts: []string{"*"},
			Claims: map[string]string{"kubernetes.io.namespace": "billing"}},
	}})
	if probs != nil {
		t.Fatal(probs)
	}
	gh := func(repo, ref string) Caller {
		return Caller{Identity: "oidc:https://token.actions.githubusercontent.com#repo:" + repo, Roles: []string{"signer"},
			Claims: map[string]string{"repository": repo, "ref": ref}}
	}
	payments := load(t, "Payments Agent", urls("https://payments.example.com/a2a")...)
	billing := load(t, "Billing Agent", urls("https://billing.example.com/a2a")...)
	tests := []struct {
		name       string
		caller     Caller
		card       string
		wantRule   string
		wantPath   string
		wantReason string // substring
	}{
		{"payments pipeline, tag", gh("acme/payments", "refs/tags/v1.2.0"), "payments", "", "", ""},
		{"payments pipeline, branch", gh("acme/payments", "refs/heads/main"), "payments", "payments-release", "claim ref", `ref "refs/heads/main" does not match "refs/tags/v*"`},
		{"other repository", gh("acme/shop", "refs/tags/v1.0.0"), "payments", "payments-release", "claim repository", `repository "acme/shop" does not match "acme/payments"`},
		{"token without the claim", Caller{Identity: "oidc:x#y", Roles: []string{"signer"}, Claims: map[string]string{"ref": "refs/tags/v1"}}, "payments", "payments-release", "claim repository", "no repository claim"},
		{"static token", Caller{Identity: "token:ci", Roles: []string{"signer"}}, "payments", "payments-release", "claim ref", "no token claims"},
		{"kubernetes namespace", Caller{Identity: "oidc:https://kubernetes.default.svc#system:serviceaccount:billing:deployer",
			Claims: map[string]string{"kubernetes.io.namespace": "billing"}}, "billing", "", "", ""},
		{"kubernetes wrong namespace", Caller{Identity: "oidc:https://kubernetes.default.svc#system:serviceaccount:billing:deployer",
			Claims: map[string]string{"kubernetes.io.namespace": "payments"}}, "billing", "k8s-billing", "claim kubernetes.io.namespace", `"payments" does not match "billing"`},
		{"payments pipeline, billing card", gh("acme/payments", "refs/tags/v1.2.0"), "billing", "payments-release", "name", "not in card_names"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := payments
			if tt.card == "billing" {
				v = billing
			}
			err := p.Check(tt.caller, v)
			if tt.wantRule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ref *Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("err = %v, want a refusal by %s", err, tt.wantRule)
			}
			if ref.Rule != tt.wantRule || ref.Path != tt.wantPath {
				t.Fatalf("refusal %+v, want rule %s path %s", ref, tt.wantRule, tt.wantPath)
			}
			if !strings.Contains(ref.Reason, tt.wantReason) {
				t.Fatalf("reason %q does not say %q", ref.Reason, tt.wantReason)
			}
		})
	}
}

func TestClaimsConfigProblems(t *testing.T) {
	_, probs := Compile(Config{Rules: []Rule{{Name: "r", Roles: []string{"signer"}, CardNames: []string{"*"}, Hosts: []string{"*"},
		Claims: map[string]string{"repository": "", " ref": "x"}}}})
	var got []string
	for _, p := range probs {
		got = append(got, p.String())
	}
	joined := strings.Join(got, "\n")
	for _, want := range []string{"rules[0].claims.repository: claim pattern is empty", "rules[0].claims: claim name"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems %q do not include %q", joined, want)
		}
	}
}

// TestCheckAgent: under a policy with rules, a caller registers a card under
// a named agent id only when a rule that allows the card lists it; the id
// derived from the card is always its own.
func TestCheckAgent(t *testing.T) {
	p, probs := Compile(Config{Rules: []Rule{
		{Name: "team-a", Identities: []string{"token:team-a"}, CardNames: []string{"*"}, Hosts: []string{"*.team-a.example.com"}, AgentIDs: []string{"team-a-*"}},
		{Name: "team-b", Identities: []string{"token:team-b"}, CardNames: []string{"*"}, Hosts: []string{"*.team-b.example.com"}},
	}})
	if probs != nil {
		t.Fatal(probs)
	}
	a := load(t, "A", urls("https://agent.team-a.example.com/a2a")...)
	b := load(t, "B", urls("https://agent.team-b.example.com/a2a")...)
	ta, tb := Caller{Identity: "token:team-a"}, Caller{Identity: "token:team-b"}
	for _, tc := range []struct {
		name    string
		caller  Caller
		card    strictjson.Value
		id      string
		allowed bool
	}{
		{"team-a, its pattern", ta, a, "team-a-payments", true},
		{"team-a, another team's id", ta, a, "team-b-payments", false},
		{"team-a, the derived id", ta, a, "agent.team-a.example.com-a2a", true},
		{"team-b, no agent_ids, the derived id", tb, b, "agent.team-b.example.com-a2a", true},
		{"team-b, no agent_ids, a named id", tb, b, "team-b-payments", false},
	} {
		err := p.CheckAgent(tc.caller, tc.card, tc.id, "agent."+strings.TrimPrefix(tc.caller.Identity, "token:")+".example.com-a2a")
		if (err == nil) != tc.allowed {
			t.Errorf("%s: err = %v, want allowed %v", tc.name, err, tc.allowed)
		}
		if err != nil && !strings.Contains(err.Error(), "agent_ids") {
			t.Errorf("%s: the refusal does not say how to fix it: %v", tc.name, err)
		}
	}
	var empty *Policy
	if err := empty.CheckAgent(tb, b, "anything", "x"); err != nil {
		t.Fatalf("no policy: %v", err)
	}
}
