package access

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
)

func tokenFor(t *testing.T, name, secret string, roles ...Role) Token {
	t.Helper()
	h, err := ParseTokenHash(hex.EncodeToString(func() []byte { s := sha256.Sum256([]byte(secret)); return s[:] }()))
	if err != nil {
		t.Fatal(err)
	}
	return Token{Name: name, SHA256: h, Roles: roles}
}

func TestAuthenticate(t *testing.T) {
	a := New([]Token{
		tokenFor(t, "pipeline-a", "cst_secret-a", RoleSigner),
		tokenFor(t, "ops", "cst_secret-ops", RoleAdmin, RoleSigner),
	}, []Client{
		{Pattern: "spiffe://example.org/ci/*", Roles: []Role{RoleSigner}},
		{Pattern: "spiffe://example.org/ci/audit", Roles: []Role{RoleAuditor}},
	})
	for _, tc := range []struct {
		name  string
		creds Credentials
		want  string
		roles []Role
	}{
		{"token", Credentials{Authorization: "Bearer cst_secret-a"}, "token:pipeline-a", []Role{RoleSigner}},
		{"scheme case", Credentials{Authorization: "bearer cst_secret-ops"}, "token:ops", []Role{RoleAdmin, RoleSigner}},
		{"token wins over cert", Credentials{Authorization: "Bearer cst_secret-a", CertIdentity: "spiffe://example.org/ci/audit"}, "token:pipeline-a", []Role{RoleSigner}},
		{"cert", Credentials{CertIdentity: "spiffe://example.org/ci/team-a"}, "cert:spiffe://example.org/ci/team-a", []Role{RoleSigner}},
		{"cert roles merge", Credentials{CertIdentity: "spiffe://example.org/ci/audit"}, "cert:spiffe://example.org/ci/audit", []Role{RoleSigner, RoleAuditor}},
		{"unknown token", Credentials{Authorization: "Bearer cst_guess"}, "", nil},
		{"bad token does not fall back to cert", Credentials{Authorization: "Bearer cst_guess", CertIdentity: "spiffe://example.org/ci/team-a"}, "", nil},
		{"basic scheme", Credentials{Authorization: "Basic dXNlcjpwYXNz"}, "", nil},
		{"empty bearer", Credentials{Authorization: "Bearer "}, "", nil},
		{"nothing", Credentials{}, "", nil},
		{"unknown cert", Credentials{CertIdentity: "spiffe://other.org/ci/x"}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := a.Authenticate(t.Context(), tc.creds)
			if tc.want == "" {
				if !errors.Is(err, ErrUnauthenticated) || err.Error() != "authentication required" {
					t.Fatalf("got %+v, %v; want the one generic refusal", id, err)
				}
				return
			}
			if err != nil || id.Name != tc.want || !slices.Equal(id.Roles, tc.roles) {
				t.Fatalf("got %+v, %v; want %s %v", id, err, tc.want, tc.roles)
			}
			if strings.HasPrefix(tc.want, "cert:") && id.Principal != "cert:spiffe://example.org/ci/*" ||
				strings.HasPrefix(tc.want, "token:") && id.Principal != tc.want {
				t.Fatalf("principal %q for %s", id.Principal, tc.want)
			}
		})
	}
}

func TestAuthenticateOff(t *testing.T) {
	a := New(nil, nil)
	if a.Enabled() {
		t.Fatal("enabled with nothing configured")
	}
	id, err := a.Authenticate(t.Context(), Credentials{Authorization: "Bearer anything"})
	if err != nil || id.Name != "anonymous" || !id.Has(RoleAdmin) || !id.Has(RoleSigner) || !id.Has(RoleAuditor) {
		t.Fatalf("got %+v, %v", id, err)
	}
}

func TestParseTokenHash(t *testing.T) {
	for _, s := range []string{"", "abc", "zz" + hex.EncodeToString(make([]byte, 31)), hex.EncodeToString(make([]byte, 33))} {
		if _, err := ParseTokenHash(s); err == nil {
			t.Errorf("ParseTokenHash(%q) accepted", s)
		}
	}
	if _, err := ParseTokenHash(hex.EncodeToString(make([]byte, 32))); err != nil {
		t.Fatal(err)
	}
}

func TestParseRole(t *testing.T) {
	for _, s := range []string{"signer", "admin", "auditor"} {
		if r, err := ParseRole(s); err != nil || string(r) != s {
			t.Errorf("ParseRole(%q) = %q, %v", s, r, err)
		}
	}
	if _, err := ParseRole("root"); err == nil {
		t.Error("accepted root")
	}
}
