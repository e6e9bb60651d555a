package daemonconfig

import (
	"strings"
	"testing"
)

// TestPolicyClaimsNameTheIssuer: with several issuers, a policy rule's claims
// must pin iss (claim names are shared across platforms); with one, they
// need not.
func TestPolicyClaimsNameTheIssuer(t *testing.T) {
	const issuers = `auth:
  oidc:
    issuers:
      - {issuer: https://token.actions.githubusercontent.com, audience: https://cardsign.example.com}
      - {issuer: https://gitlab.example.com, audience: https://cardsign.example.com}
    rules:
      - {issuer: https://gitlab.example.com, claims: {project_path: "acme/*"}, roles: [signer]}
policy:
  rules:
    - name: payments
      roles: [signer]
      card_names: ["*"]
      hosts: ["*"]
`
	for _, tc := range []struct {
		claims, want string
	}{
		{`{environment: production}`, "add iss: ISSUER"},
		{`{environment: production, iss: "https://token.actions.githubusercontent.com"}`, ""},
	} {
		_, _, err := loadValidated(t, issuers+"      claims: "+tc.claims+"\n")
		switch {
		case tc.want == "" && err != nil && strings.Contains(err.Error(), "add iss"):
			t.Errorf("claims %s: %v", tc.claims, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("claims %s: err = %v, want %q", tc.claims, err, tc.want)
		}
	}
}
