package oidc

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	notPEM := testsupport.WriteFileMode(t, filepath.Join(dir, "not.pem"), "hello", 0o644)
	good := func() Config {
		return Config{
			Issuers: []IssuerConfig{{Issuer: "https://token.actions.githubusercontent.com", Audience: "https://cardsign.example"}},
			Rules:   []RoleRule{{Issuer: "https://token.actions.githubusercontent.com", Claims: map[string]string{"repository": "acme/*"}, Roles: []string{"signer"}}},
		}
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string // each a problem, in order
	}{
		{"good", func(*Config) {}, nil},
		{"empty", func(c *Config) { *c = Config{} }, nil},
		{"http issuer", func(c *Config) { c.Issuers[0].Issuer = "http://issuer.example"; c.Rules = nil },
			[]string{"auth.oidc.issuers[0].issuer: \"http://issuer.example\" must be an https URL"}},
		{"issuer missing", func(c *Config) { c.Issuers[0].Issuer = ""; c.Rules = nil }, []string{"auth.oidc.issuers[0].issuer: required"}},
		{"issuer with query", func(c *Config) { c.Issuers[0].Issuer = "https://x.example/?a=b"; c.Rules = nil },
			[]string{"auth.oidc.issuers[0].issuer: \"https://x.example/?a=b\" must be https://HOST[/PATH]"}},
		{"duplicate issuer", func(c *Config) { c.Issuers = append(c.Issuers, c.Issuers[0]) },
			[]string{"auth.oidc.issuers[1].issuer: \"https://token.actions.githubusercontent.com\" is also issuers[0]"}},
		{"no audience", func(c *Config) { c.Issuers[0].Audience = " " }, []string{"auth.oidc.issuers[0].audience: required"}},
		{"symmetric and none", func(c *Config) { c.Issuers[0].Algorithms = []string{"RS256", "HS256", "none"} },
			[]string{"auth.oidc.issuers[0].algorithms[1]: \"HS256\" is not allowed", "auth.oidc.issuers[0].algorithms[2]: \"none\" is not allowed"}},
		{"empty glob", func(c *Config) { c.Issuers[0].Claims = map[string]string{"repository_owner": ""} },
			[]string{"auth.oidc.issuers[0].claims.repository_owner: the pattern must be non-empty"}},
		{"ca file missing", func(c *Config) { c.Issuers[0].CAFile = filepath.Join(dir, "nope.pem") },
			[]string{"auth.oidc.issuers[0].ca_file: open "}},
		{"ca file not PEM", func(c *Config) { c.Issuers[0].CAFile = notPEM },
			[]string{"auth.oidc.issuers[0].ca_file: " + notPEM + ": no PEM certificate"}},
		{"rule for an unknown issuer", func(c *Config) { c.Rules[0].Issuer = "https://gitlab.com" },
			[]string{"auth.oidc.rules[0].issuer: \"https://gitlab.com\" is not one of auth.oidc.issuers"}},
		{"rule without claims", func(c *Config) { c.Rules[0].Claims = nil }, []string{"auth.oidc.rules[0].claims: required"}},
		{"rule with a bad role", func(c *Config) { c.Rules[0].Roles = []string{"signer", "root"} },
			[]string{"auth.oidc.rules[0].roles[1]: unknown role \"root\""}},
		{"rule without roles", func(c *Config) { c.Rules[0].Roles = nil }, []string{"auth.oidc.rules[0].roles: required"}},
		{"skew too large", func(c *Config) { c.ClockSkew = time.Hour }, []string{"auth.oidc.clock_skew: 1h0m0s is more than the maximum 5m0s"}},
		{"negative size", func(c *Config) { c.MaxTokenBytes = -1 }, []string{"auth.oidc.max_token_bytes: must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.mutate(&c)
			probs := c.Validate()
			if len(probs) != len(tt.want) {
				t.Fatalf("problems %q, want %d", probs, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(probs[i], w) {
					t.Errorf("problem %q, want prefix %q", probs[i], w)
				}
			}
			_, err := New(t.Context(), c, Options{})
			if (err == nil) != (len(tt.want) == 0) {
				t.Errorf("New: %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), tt.want[0]) {
				t.Errorf("New's error %q does not list %q", err, tt.want[0])
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c := Config{Issuers: []IssuerConfig{{Issuer: "https://x.example", Audience: "a"}}}.withDefaults()
	if c.ClockSkew != DefaultClockSkew || c.MaxTokenBytes != DefaultMaxTokenBytes ||
		!slices.Equal(c.Issuers[0].Algorithms, []string{"RS256", "ES256"}) || c.Issuers[0].SubjectClaim != "sub" {
		t.Fatalf("defaults %+v", c)
	}
	if c := (Config{ClockSkew: -1}).withDefaults(); c.ClockSkew != 0 {
		t.Fatalf("negative skew became %v", c.ClockSkew)
	}
}

// TestRuleOfStarsRefused: a role rule whose every claim pattern is "*" would
// grant its roles to every token of a shared issuer.
func TestRuleOfStarsRefused(t *testing.T) {
	cfg := Config{
		Issuers: []IssuerConfig{{Issuer: "https://token.actions.githubusercontent.com", Audience: "https://cardsign.example.com"}},
		Rules:   []RoleRule{{Issuer: "https://token.actions.githubusercontent.com", Claims: map[string]string{"sub": "*", "repository": "**"}, Roles: []string{"signer"}}},
	}
	probs := strings.Join(cfg.Validate(), "\n")
	if !strings.Contains(probs, `auth.oidc.rules[0].claims: every pattern is "*"`) {
		t.Fatalf("problems %q do not refuse a rule of stars", probs)
	}
	cfg.Rules[0].Claims["repository"] = "acme/*"
	if probs := cfg.Validate(); len(probs) != 0 {
		t.Fatalf("a rule pinning the repository: %v", probs)
	}
}
