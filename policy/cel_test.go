package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/carddiff"
	"github.com/cardsign/cardsign/strictjson"
)

func cond(name, when string, outcome Outcome) Rule {
	return Rule{Name: name, When: when, Outcome: outcome}
}

// TestConditionCompileProblems: every malformed condition rule and every
// hostile expression is refused when the configuration loads, naming the
// field, and for an expression the position in it.
func TestConditionCompileProblems(t *testing.T) {
	nested := strings.Repeat("(", 40) + "true" + strings.Repeat(")", 40)
	tests := []struct {
		name string
		cfg  Config
		path string
		want string
	}{
		{"outcome without when", Config{Rules: []Rule{{Name: "r", Outcome: OutcomeDeny}}}, "rules[0].when", "needs when"},
		{"card_names on a condition rule", Config{Rules: []Rule{{Name: "r", When: "true", Outcome: OutcomeDeny, CardNames: []string{"*"}}}}, "rules[0].card_names", "decides by its expression alone"},
		{"no outcome", Config{Rules: []Rule{{Name: "r", When: "true"}}}, "rules[0].outcome", "allow, deny or require_approval"},
		{"unknown outcome", Config{Rules: []Rule{cond("r", "true", "maybe")}}, "rules[0].outcome", `"maybe"`},
		{"approvals on deny", Config{Rules: []Rule{{Name: "r", When: "true", Outcome: OutcomeDeny, Approvals: &ApprovalRule{Count: 2}}}}, "rules[0].approvals", "only a require_approval"},
		{"too many approvers", Config{Rules: []Rule{{Name: "r", When: "true", Outcome: OutcomeRequireApproval, Approvals: &ApprovalRule{Count: 17}}}}, "rules[0].approvals.count", "want 1 to 16"},
		{"unknown group", Config{Rules: []Rule{{Name: "r", When: "true", Outcome: OutcomeRequireApproval, Approvals: &ApprovalRule{Group: "sec"}}}}, "rules[0].approvals.group", `no group "sec"`},
		{"rule ttl too short", Config{Rules: []Rule{{Name: "r", When: "true", Outcome: OutcomeRequireApproval, Approvals: &ApprovalRule{TTL: time.Millisecond}}}}, "rules[0].approvals.ttl", "want 1s"},
		{"policy ttl too long", Config{ApprovalTTL: 40 * 24 * time.Hour}, "approval_ttl", "want 1s"},
		{"empty group", Config{Groups: map[string][]string{"sec": nil}}, "groups.sec", "no members"},
		{"bad group name", Config{Groups: map[string][]string{"Sec Team": {"token:a"}}}, "groups", "a-z 0-9"},
		{"unknown role", Config{Rules: []Rule{{Name: "r", When: "true", Outcome: OutcomeDeny, Roles: []string{"boss"}}}}, "rules[0].roles[0]", "unknown role"},
		{"control character in message", Config{Rules: []Rule{{Name: "r", When: "true", Outcome: OutcomeDeny, Message: "a\x1b[2Jb"}}}, "rules[0].message", "control characters"},
		{"syntax error", Config{Rules: []Rule{cond("r", "size(diff.hosts_added > 0", OutcomeDeny)}}, "rules[0].when", `rule "r": expression 1:`},
		{"undeclared field", Config{Rules: []Rule{cond("r", "diff.hosts_addded.size() > 0", OutcomeDeny)}}, "rules[0].when", "1:5: undefined field 'hosts_addded'"},
		{"undeclared variable", Config{Rules: []Rule{cond("r", "cards.name == 'x'", OutcomeDeny)}}, "rules[0].when", "undeclared reference to 'cards'"},
		{"position on the second line", Config{Rules: []Rule{cond("r", "true &&\n  diff.nope", OutcomeDeny)}}, "rules[0].when", "2:"},
		{"not a bool", Config{Rules: []Rule{cond("r", "size(diff.hosts_added) + 1", OutcomeDeny)}}, "rules[0].when", "is of type int"},
		{"empty expression", Config{Rules: []Rule{cond("r", "  ", OutcomeDeny)}}, "rules[0].when", "is empty"},
		{"huge expression", Config{Rules: []Rule{cond("r", strings.Repeat("true && ", 600)+"true", OutcomeDeny)}}, "rules[0].when", "over the limit of 4096"},
		{"deep nesting", Config{Rules: []Rule{cond("r", nested, OutcomeDeny)}}, "rules[0].when", "recursion"},
		{"nested comprehensions", Config{Rules: []Rule{cond("r", "[1].all(a, [1].all(b, [1].all(c, [1].all(d, true))))", OutcomeDeny)}}, "rules[0].when", "nesting limit"},
		{"bad regular expression", Config{Rules: []Rule{cond("r", "card.name.matches('(')", OutcomeDeny)}}, "rules[0].when", "1:19: invalid matches argument"},
		{"mixed list literal", Config{Rules: []Rule{cond("r", "[1, 'a'].size() > 0", OutcomeDeny)}}, "rules[0].when", "expected type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, probs := Compile(tc.cfg)
			if p != nil {
				t.Fatal("compiled")
			}
			for _, pr := range probs {
				if pr.Path == tc.path && strings.Contains(pr.Message, tc.want) {
					return
				}
			}
			t.Fatalf("problems %v; want one at %s containing %q", probs, tc.path, tc.want)
		})
	}
}

func parseCard(t testing.TB, s string) strictjson.Value {
	t.Helper()
	v, err := strictjson.Parse([]byte(s), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDecide covers every outcome, the order of the rules, the callers a
// rule applies to and the variables an expression sees.
func TestDecide(t *testing.T) {
	sec := &ApprovalRule{Count: 2, Group: "security"}
	p := mustCompile(t, Config{
		Groups: map[string][]string{"security": {"token:alice", "oidc:https://idp#*"}},
		Rules: []Rule{
			{Name: "release-managers", Roles: []string{"admin"}, When: "true", Outcome: OutcomeAllow},
			{Name: "no-test-hosts", When: "card.supportedInterfaces.exists(i, i.url.contains('.test/'))", Outcome: OutcomeDeny, Message: "test hosts are not signed"},
			{Name: "oauth-only-from-main", When: "size(diff.oauth_flows_removed) > 0 && caller.claims.?ref.orValue('') != 'refs/heads/main'", Outcome: OutcomeDeny, Message: "OAuth flows are dropped only in a release from main"},
			{Name: "new-host", When: "!diff.first && size(diff.hosts_added) > 0", Outcome: OutcomeRequireApproval, Message: "a new host needs the security team", Approvals: sec},
			{Name: "public-needs-review", When: "request.register && request.visibility == 'public' && previous == null", Outcome: OutcomeRequireApproval},
			{Name: "ci-only", Identities: []string{"token:ci"}, When: "card.version.startsWith('0.')", Outcome: OutcomeDeny},
		},
	})
	card := parseCard(t, `{"name":"a","version":"0.9","supportedInterfaces":[{"url":"https://a.example.com/a2a","protocolBinding":"JSONRPC"}]}`)
	testCard := parseCard(t, `{"name":"a","supportedInterfaces":[{"url":"https://a.test/a2a"}]}`)
	signer := Caller{Identity: "token:pipeline", Roles: []string{"signer"}}
	tests := []struct {
		name     string
		in       Input
		outcome  Outcome
		rule     string
		approval int
	}{
		{"nothing holds", Input{Caller: signer, Card: card, Diff: carddiff.Diff{}}, OutcomeAllow, "", 0},
		{"deny", Input{Caller: signer, Card: testCard}, OutcomeDeny, "no-test-hosts", 0},
		{"allow stops the rules after it", Input{Caller: Caller{Identity: "token:rm", Roles: []string{"admin"}}, Card: testCard}, OutcomeAllow, "release-managers", 0},
		{"oauth dropped outside main", Input{Caller: signer, Card: card, Diff: carddiff.Diff{OAuthFlowsRemoved: []string{"corp.implicit"}}}, OutcomeDeny, "oauth-only-from-main", 0},
		{"oauth dropped from main", Input{Caller: Caller{Identity: "oidc:x#y", Roles: []string{"signer"}, Claims: map[string]string{"ref": "refs/heads/main"}}, Card: card, Diff: carddiff.Diff{OAuthFlowsRemoved: []string{"corp.implicit"}}}, OutcomeAllow, "", 0},
		{"new host", Input{Caller: signer, Card: card, Diff: carddiff.Diff{HostsAdded: []string{"b.example.com"}}}, OutcomeRequireApproval, "new-host", 2},
		{"first version's hosts are not new", Input{Caller: signer, Card: card, Diff: carddiff.Diff{First: true, HostsAdded: []string{"a.example.com"}}}, OutcomeAllow, "", 0},
		{"request variables", Input{Caller: signer, Card: card, Request: Request{Register: true, Visibility: "public"}}, OutcomeRequireApproval, "public-needs-review", 1},
		{"previous set", Input{Caller: signer, Card: card, Previous: card, Request: Request{Register: true, Visibility: "public"}}, OutcomeAllow, "", 0},
		{"identity-scoped rule", Input{Caller: Caller{Identity: "token:ci", Roles: []string{"signer"}}, Card: card}, OutcomeDeny, "ci-only", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := p.Decide(t.Context(), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if d.Outcome != tc.outcome || d.Rule != tc.rule || d.Approvals != tc.approval {
				t.Fatalf("decision %+v; want %s by %q with %d approvals", d, tc.outcome, tc.rule, tc.approval)
			}
			if d.Outcome == OutcomeRequireApproval && d.TTL != DefaultApprovalTTL {
				t.Errorf("ttl %s, want the default %s", d.TTL, DefaultApprovalTTL)
			}
			if tc.rule != "" && d.Trace[len(d.Trace)-1] != (Step{tc.rule, "true"}) {
				t.Errorf("trace %v does not end with the deciding rule", d.Trace)
			}
		})
	}
}

// TestDecideFailsClosed: an expression that cannot be evaluated (a
// missing key, wrong types, the cost limit) refuses the card.
func TestDecideFailsClosed(t *testing.T) {
	var skills []string
	for i := range 3000 {
		skills = append(skills, fmt.Sprintf(`{"id":"s%d","tags":["a","b"]}`, i))
	}
	big := parseCard(t, `{"name":"a","skills":[`+strings.Join(skills, ",")+`]}`)
	tests := []struct{ name, when, want string }{
		{"missing key", "card.provider.organization == 'x'", "no such key"},
		{"claims of a caller without them", "caller.claims.ref == 'refs/heads/main'", "no such key"},
		{"wrong types", "card.name > 3", "no such overload"},
		{"not a bool at run time", "card.name", "not a bool"},
		{"cost limit", "card.skills.filter(a, card.skills.exists(b, b.id == a.id + 'x')).size() == 0", "cost limit"},
	}
	t.Run("caller gone", func(t *testing.T) {
		p := mustCompile(t, Config{Rules: []Rule{cond("r", "card.skills.exists(s, s.id == 'none')", OutcomeAllow)}})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := p.Decide(ctx, Input{Card: big}); !errors.Is(err, context.Canceled) || errors.As(err, new(*EvalError)) {
			t.Fatalf("err %v; want the caller's context.Canceled, no rule blamed", err)
		}
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, Config{Rules: []Rule{cond("r", tc.when, OutcomeAllow)}})
			start := time.Now()
			d, err := p.Decide(t.Context(), Input{Caller: Caller{Identity: "token:a"}, Card: big})
			var ee *EvalError
			if !errors.As(err, &ee) || ee.Rule != "r" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v; want an EvalError of rule r containing %q", err, tc.want)
			}
			if d.Outcome != OutcomeDeny || !strings.Contains(err.Error(), "fail closed") {
				t.Fatalf("decision %+v, err %v: want deny, fail closed", d, err)
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Fatalf("evaluation took %s: the limits do not bound it", el)
			}
		})
	}
}

// TestMayApprove: the approver role, never the requester, the rule's group.
func TestMayApprove(t *testing.T) {
	p := mustCompile(t, Config{Groups: map[string][]string{"security": {"token:alice", "oidc:https://idp#team-sec-*"}}})
	approver := func(id string) Caller { return Caller{Identity: id, Roles: []string{"approver"}} }
	tests := []struct {
		name      string
		who       Caller
		requester string
		group     string
		want      string
	}{
		{"approver", approver("token:bob"), "token:ci", "", ""},
		{"group member", approver("token:alice"), "token:ci", "security", ""},
		{"group member by glob", approver("oidc:https://idp#team-sec-carol"), "token:ci", "security", ""},
		{"not in group", approver("token:bob"), "token:ci", "security", "not in approver group"},
		{"no approver role", Caller{Identity: "token:alice", Roles: []string{"signer", "admin"}}, "token:ci", "security", "approver role"},
		{"requester", approver("token:alice"), "token:alice", "security", "cannot approve it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := p.MayApprove(tc.who, tc.requester, tc.group)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("MayApprove: %v; want %q", err, tc.want)
			}
		})
	}
}
