package main

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestHintsForIdentityTokens: refusals of an OIDC identity token get hints
// about identity tokens (its issuer, audience, the daemon's role rules),
// not only about bearer token files.
func TestHintsForIdentityTokens(t *testing.T) {
	for _, tc := range []struct {
		name    string
		st      *status.Status
		want    []string
		wantNot []string
	}{
		{"identity token refused", status.New(codes.Unauthenticated, "identity token refused: audience"),
			[]string{"hint: cardsignd refused the OIDC identity token", "auth.oidc.issuers", "--id-token-audience"}, []string{"--token-file"}},
		{"no credential accepted", status.New(codes.Unauthenticated, "authentication required"),
			[]string{"--token-file", "--id-token", "--cert-file"}, nil},
		{"identity token matching no rule", status.New(codes.PermissionDenied, "permission denied: the identity token is valid, but no rule matched it (…)"),
			[]string{"hint: cardsignd verified the identity token", "auth.oidc.rules"}, []string{"--token-file", "signer for sign"}},
		{"a role missing", status.New(codes.PermissionDenied, "permission denied"),
			[]string{"lacks the role"}, []string{"auth.oidc.rules"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := describe(tc.st.Err())
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("%q lacks %q", out, w)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(out, w) {
					t.Errorf("%q holds %q", out, w)
				}
			}
		})
	}
}
