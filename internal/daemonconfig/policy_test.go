package daemonconfig

import "testing"

// TestPolicyConditionConfig: condition rules load from YAML (durations,
// groups, approvals), and --check-config names a broken expression's rule,
// its position in the expression and the file's line.
func TestPolicyConditionConfig(t *testing.T) {
	good := `policy:
  approval_ttl: 12h
  groups:
    security: ["token:alice", "oidc:https://token.actions.githubusercontent.com#*"]
  rules:
    - name: new-host
      when: "!diff.first && size(diff.hosts_added) > 0"
      outcome: require_approval
      message: a new host needs the security team
      approvals: {count: 2, group: security, ttl: 2h}
    - name: no-drop
      when: |
        size(diff.oauth_flows_removed) > 0 &&
        caller.claims.?ref.orValue("") != "refs/heads/main"
      outcome: deny
`
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"valid", good, nil},
		{"typo in an expression", "policy:\n  rules:\n    - name: new-host\n      when: size(diff.hostz) > 0\n      outcome: deny\n",
			[]string{"c.yaml:4:7: policy.rules[0].when", `rule "new-host"`, "1:10: undefined field 'hostz'"}},
		{"unknown field in a rule", "policy:\n  rules:\n    - name: r\n      when: \"true\"\n      outcome: deny\n      approval: {count: 2}\n",
			[]string{"c.yaml:6: ", `unknown field "approval"`}},
		{"ttl not a duration", "policy:\n  approval_ttl: tomorrow\n", []string{"c.yaml:2: ", "time.Duration"}},
		{"group unknown", "policy:\n  rules:\n    - name: r\n      when: \"true\"\n      outcome: require_approval\n      approvals: {group: sec}\n",
			[]string{"policy.rules[0].approvals.group", `no group "sec"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := loadValidated(t, tc.yaml)
			wantMentions(t, cfg, err, tc.want)
		})
	}
}
