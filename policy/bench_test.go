package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/cardsign/cardsign/carddiff"
	"github.com/cardsign/cardsign/strictjson"
)

// loadPolicyFile reads the policy section of a YAML file.
func loadPolicyFile(t testing.TB, name string) Config {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Policy Config `yaml:"policy"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Policy
}

func readCard(t testing.TB, name string) strictjson.Value {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "cards", name))
	if err != nil {
		t.Fatal(err)
	}
	return parseCard(t, string(data))
}

// BenchmarkPolicyDecide is the cost the condition rules add to a sign:
// the diff against the previous card and 20 rules evaluated
// (docs/benchmarks.md "Signing policy").
func BenchmarkPolicyDecide(b *testing.B) {
	p := mustCompile(b, loadPolicyFile(b, "../testdata/policy/twenty-rules.yaml"))
	cur, prev := readCard(b, "payments-v2.json"), readCard(b, "payments-v1.json")
	caller := Caller{Identity: "oidc:https://idp#repo:acme/payments", Method: "oidc", Roles: []string{"signer"},
		Claims: map[string]string{"ref": "refs/heads/main", "environment": "production"}}
	b.ReportAllocs()
	for b.Loop() {
		in := Input{Caller: caller, Card: cur, Previous: prev, Diff: carddiff.Compute(cur, prev)}
		d, err := p.Decide(b.Context(), in)
		if err != nil || d.Rule != "" {
			b.Fatalf("decision %+v, %v: want no rule to hold", d, err)
		}
	}
}

// TestDocsPolicyExample: the example policy of docs/policy.md compiles,
// and decides as the page says.
func TestDocsPolicyExample(t *testing.T) {
	page, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), "## Examples of the three outcomes")
	_, rest, ok2 := strings.Cut(rest, "```yaml\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/policy.md has no yaml block under \"Examples of the three outcomes\"")
	}
	var cfg struct {
		Policy Config `yaml:"policy"`
	}
	if err := yaml.Unmarshal([]byte(block), &cfg); err != nil {
		t.Fatal(err)
	}
	p := mustCompile(t, cfg.Policy)
	prev := readCard(t, "payments-v1.json")
	cur := readCard(t, "payments-v2.json")
	ifaces, _ := cur.Get("supportedInterfaces")
	eu := parseCard(t, `{"url":"https://eu.payments.example.com/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}`)
	for i := range cur.Obj {
		if cur.Obj[i].Key == "supportedInterfaces" {
			cur.Obj[i].Val.Arr = append(ifaces.Arr, eu)
		}
	}
	d, err := p.Decide(t.Context(), Input{Caller: Caller{Identity: "oidc:https://idp.example.com#ci", Roles: []string{"signer"}}, Card: cur, Previous: prev, Diff: carddiff.Compute(cur, prev)})
	if err != nil || d.Outcome != OutcomeRequireApproval || d.Rule != "new-host-or-scheme" || d.Approvals != 2 || d.Group != "security" {
		t.Fatalf("decision %+v, %v: want require_approval by new-host-or-scheme, 2 of security", d, err)
	}
}
