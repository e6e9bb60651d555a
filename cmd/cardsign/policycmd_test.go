package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyTest: cardsign policy test decides offline as cardsignd does,
// prints each rule's part and the diff, and --expect turns it into a CI
// check; a broken policy or card is a usage error naming the problem.
func TestPolicyTest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		f := filepath.Join(dir, name)
		writeFile(t, f, []byte(data))
		return f
	}
	cfg := write("cardsignd.yaml", `grpc_addr: 127.0.0.1:7700
policy:
  groups:
    security: ["oidc:https://idp#alice"]
  rules:
    - {name: payments, roles: [signer], card_names: ["Payments Agent"], hosts: ["*.example.com", payments.example.com]}
    - name: main-only
      when: caller.claims.?ref.orValue("") != "refs/heads/main" && diff.version_changed && !diff.first
      outcome: deny
      message: releases come from main
    - name: new-host
      when: "!diff.first && size(diff.hosts_added) > 0"
      outcome: require_approval
      message: a new host needs the security team
      approvals: {count: 2, group: security}
`)
	v1 := write("v1.json", paymentsCard)
	v2 := write("v2.json", strings.Replace(strings.Replace(paymentsCard, `"version": "1.2.0"`, `"version": "1.3.0"`, 1),
		`"supportedInterfaces": [`, `"supportedInterfaces": [{"url": "https://eu.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}, `, 1))
	mainClaims := write("main.json", `{"iss":"https://idp","sub":"repo:acme/payments","ref":"refs/heads/main","repository":"acme/payments"}`)
	branchClaims := write("branch.json", `{"iss":"https://idp","sub":"repo:acme/payments","ref":"refs/heads/feature","repository":"acme/payments"}`)
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
	}{
		{"first version is allowed", []string{"--card", v1, "--expect", "allow"}, exitOK,
			[]string{"permission rules: allowed", "condition rule main-only: false", "condition rule new-host: false", "decision: allow (no condition rule holds)", "diff: (first version of this agent"}},
		{"a new host from main needs two approvals", []string{"--card", v2, "--previous", v1, "--claims", mainClaims, "--expect", "require_approval"}, exitOK,
			[]string{"condition rule new-host: true", `decision: require_approval by rule "new-host" (2 approvals from group "security"): a new host needs the security team`, "diff: + host eu.example.com", "diff: version 1.2.0 → 1.3.0"}},
		{"a release from a branch is denied", []string{"--card", v2, "--previous", v1, "--claims", branchClaims}, exitOK,
			[]string{"condition rule main-only: true", `decision: deny by rule "main-only": releases come from main`}},
		{"--expect not met", []string{"--card", v2, "--previous", v1, "--claims", branchClaims, "--expect", "allow"}, exitFail, nil},
		{"permission rules refuse another caller's card", []string{"--card", v1, "--roles", "auditor"}, exitOK,
			[]string{"permission rules: refused: signing policy: no signing policy rule applies", "decision: deny"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := cardsign(t, dir, nil, append([]string{"policy", "test", "--config", cfg, "--identity", "oidc:https://idp#repo:acme/payments"}, tc.args...)...)
			if r.Code != tc.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", r.Code, tc.code, r.Stdout, r.Stderr)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(r.Stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.Stdout)
				}
			}
		})
	}
	broken := write("broken.yaml", "policy:\n  rules:\n    - {name: r, when: \"size(diff.hostz) > 0\", outcome: deny}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", broken, "--card", v1}, `policy.rules[0].when: rule "r": expression 1:10: undefined field 'hostz'`},
		{[]string{"--config", cfg, "--card", write("bad.json", `{"name": 1}`)}, "--card:"},
		{[]string{"--config", cfg, "--card", v1, "--claims", write("claims.json", `[1]`)}, "--claims:"},
		{[]string{"--config", cfg, "--card", v1, "--expect", "maybe"}, "--expect wants allow, deny or require_approval"},
		{[]string{"--card", v1}, "test needs --config FILE and --card FILE"},
	} {
		r := cardsign(t, dir, nil, append([]string{"policy", "test"}, tc.args...)...)
		if r.Code != exitUsage || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("policy test %v: exit %d, stderr %s; want exit %d naming %q", tc.args, r.Code, r.Stderr, exitUsage, tc.want)
		}
	}
}
