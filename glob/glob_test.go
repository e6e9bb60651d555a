package glob

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true},
		{"", "a", false},
		{"*", "", true},
		{"*", "spiffe://example.org/ci/team-a", true},
		{"spiffe://example.org/ci/*", "spiffe://example.org/ci/team-a/job", true},
		{"spiffe://example.org/ci/*", "spiffe://example.org/cd/team-a", false},
		{"team-a-*", "team-a-weather", true},
		{"team-a-*", "team-b-weather", false},
		{"team-?", "team-a", true},
		{"team-?", "team-ä", true},
		{"team-?", "team-ab", false},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"*.example.com", "x.example.com", true},
		{"*.example.com", "example.com", false},
		{"Team", "team", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"**", "x", true},
	} {
		if got := Match(tc.pattern, tc.s); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// A pattern built to make a backtracking matcher exponential stays fast.
func TestMatchNoBlowup(t *testing.T) {
	pattern := strings.Repeat("a*", 30) + "b"
	s := strings.Repeat("a", 5000)
	if Match(pattern, s) {
		t.Fatal("matched")
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("a*b?c", "aXbYc")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		got := Match(pattern, s)
		// A pattern without wildcards matches exactly itself.
		if !strings.ContainsAny(pattern, "*?") && got != (pattern == s) {
			t.Fatalf("Match(%q, %q) = %v", pattern, s, got)
		}
		if Match("*", s) != true {
			t.Fatal("* must match everything")
		}
	})
}
