package glob

import (
	"strings"
	"testing"
)

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
