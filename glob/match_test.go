package glob

import (
	"strings"
	"testing"
	"time"
)

func TestMatchCases(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"", "", true},
		{"", "a", false},
		{"*", "", true},
		{"*", "anything/at all", true},
		{"abc", "abc", true},
		{"abc", "abcd", false},
		{"abc", "xabc", false},
		{"abc", "ABC", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a?c", "aéc", true}, // '?' is one character, not one byte
		{"a??c", "aéc", false},
		{"team-a-*", "team-a-", true},
		{"team-a-*", "team-a-weather", true},
		{"team-a-*", "team-b-weather", false},
		{"team-a-*", "xteam-a-weather", false},
		{"*-agent", "weather-agent", true},
		{"*-agent", "weather-agents", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZcd", false},
		{"*a*", "bab", true},
		{"spiffe://example.org/ci/team-a/*", "spiffe://example.org/ci/team-a/deploy/prod", true}, // '*' crosses '/'
		{"spiffe://example.org/ci/team-a/*", "spiffe://example.org/ci/team-a", false},
		{"spiffe://example.org/ci/*/deploy", "spiffe://example.org/ci/team-a/deploy", true},
		{"[ab]", "a", false}, // no character classes
		{"[ab]", "[ab]", true},
		{`a\*`, `a\xyz`, true}, // no escapes
		{"?", "", false},
		{"*?", "", false},
		{"*?", "é", true},
		{"é*", "éa", true},
		{"*\xff", "a\xff", true},
		// identities and hosts
		{"*", "spiffe://example.org/ci/team-a", true},
		{"spiffe://example.org/ci/*", "spiffe://example.org/ci/team-a/job", true},
		{"spiffe://example.org/ci/*", "spiffe://example.org/cd/team-a", false},
		{"*.example.com", "x.example.com", true},
		{"*.example.com", "example.com", false},
		{"**", "x", true},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.name); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
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
