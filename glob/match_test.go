package glob

import (
	"strings"
	"testing"
	"time"
)

// TestMatchCases: for each pattern, names it matches and names it does not.
func TestMatchCases(t *testing.T) {
	tests := []struct {
		pattern        string
		match, noMatch []string
	}{
		{"", []string{""}, []string{"a"}},
		{"*", []string{"", "anything/at all"}, nil},
		{"abc", []string{"abc"}, []string{"abcd", "xabc", "ABC"}},
		{"a?c", []string{"abc", "aéc"}, []string{"ac"}}, // '?' is one character, not one byte
		{"a??c", nil, []string{"aéc"}},
		{"team-a-*", []string{"team-a-", "team-a-weather"}, []string{"team-b-weather", "xteam-a-weather"}},
		{"*-agent", []string{"weather-agent"}, []string{"weather-agents"}},
		{"a*b*c", []string{"abc", "aXbYbZc"}, []string{"aXbYbZcd"}},
		{"*a*", []string{"bab"}, nil},
		{"spiffe://example.org/ci/team-a/*", []string{"spiffe://example.org/ci/team-a/deploy/prod"}, // '*' crosses '/'
			[]string{"spiffe://example.org/ci/team-a"}},
		{"spiffe://example.org/ci/*/deploy", []string{"spiffe://example.org/ci/team-a/deploy"}, nil},
		{"[ab]", []string{"[ab]"}, []string{"a"}}, // no character classes
		{`a\*`, []string{`a\xyz`}, nil},           // no escapes
		{"?", nil, []string{""}},
		{"*?", []string{"é"}, []string{""}},
		{"é*", []string{"éa"}, nil},
		{"*\xff", []string{"a\xff"}, nil},
		// identities and hosts
		{"*", []string{"spiffe://example.org/ci/team-a"}, nil},
		{"spiffe://example.org/ci/*", []string{"spiffe://example.org/ci/team-a/job"}, []string{"spiffe://example.org/cd/team-a"}},
		{"*.example.com", []string{"x.example.com"}, []string{"example.com"}},
		{"**", []string{"x"}, nil},
	}
	for _, tt := range tests {
		for _, name := range tt.match {
			if !Match(tt.pattern, name) {
				t.Errorf("Match(%q, %q) = false, want true", tt.pattern, name)
			}
		}
		for _, name := range tt.noMatch {
			if Match(tt.pattern, name) {
				t.Errorf("Match(%q, %q) = true, want false", tt.pattern, name)
			}
		}
	}
}

// TestMatchCasesNotExponential: a naive recursive matcher takes exponential
// time on this pair; ours is quadratic at worst.
func TestMatchCasesNotExponential(t *testing.T) {
	pattern := strings.Repeat("*a", 40) + "b"
	name := strings.Repeat("a", 4000)
	start := time.Now()
	if Match(pattern, name) {
		t.Fatal("matched")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("globMatch took %v", d)
	}
}
