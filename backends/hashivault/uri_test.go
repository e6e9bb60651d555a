//go:build !novault

package hashivault

import (
	"errors"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

func TestParseURI(t *testing.T) {
	tests := []struct {
		uri  string
		want keyRef
		bad  string
	}{
		{uri: "hashivault://cards", want: keyRef{name: "cards"}},
		{uri: "hashivault://cards/12", want: keyRef{name: "cards", version: 12}},
		{uri: "HashiVault://cards/1?alg=PS256", want: keyRef{name: "cards", version: 1, alg: jose.PS256}},
		{uri: "hashivault://", bad: "key name"},
		{uri: "hashivault://a/b/c", bad: "version"},
		{uri: "hashivault://cards/0", bad: "version"},
		{uri: "hashivault://cards/01", bad: "version"},
		{uri: "hashivault://../sys/seal", bad: "key name"},
		{uri: "hashivault://cards?mount=sys", bad: "unknown query"},
		{uri: "hashivault://cards?alg=XS1", bad: "XS1"},
		{uri: "awskms:///cards", bad: "hashivault://"},
	}
	for _, tt := range tests {
		got, err := parseURI(tt.uri)
		if tt.bad != "" {
			var ue *backends.URIError
			if !errors.As(err, &ue) || !contains(err.Error(), tt.bad) {
				t.Errorf("parseURI(%q) = %v, want a *backends.URIError with %q", tt.uri, err, tt.bad)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseURI(%q) = %+v, %v; want %+v", tt.uri, got, err, tt.want)
		}
	}
}

func TestConfig(t *testing.T) {
	t.Setenv("BAO_ADDR", "")
	t.Setenv("VAULT_ADDR", "")
	for _, tt := range []struct {
		cfg Config
		bad string
	}{
		{Config{}, "no Vault address"},
		{Config{Address: "http://vault.example:8200", Auth: Auth{Token: "t"}}, "in clear"},
		{Config{Address: "https://u:p@vault.example", Auth: Auth{Token: "t"}}, "user info"},
		{Config{Address: "https://vault.example", Mount: "../sys", Auth: Auth{Token: "t"}}, "mount"},
		{Config{Address: "https://vault.example", Auth: Auth{Method: "ldap"}}, "ldap"},
		{Config{Address: "https://vault.example", Auth: Auth{Method: AuthAppRole, RoleID: "r"}}, "secret ID"},
		{Config{Address: "https://vault.example", Auth: Auth{Method: AuthKubernetes}}, "role"},
	} {
		t.Setenv("BAO_TOKEN", "")
		t.Setenv("VAULT_TOKEN", "")
		_, err := New(t.Context(), tt.cfg)
		if err == nil || !contains(err.Error(), tt.bad) {
			t.Errorf("New(%+v) = %v, want an error with %q", tt.cfg, err, tt.bad)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
