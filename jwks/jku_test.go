package jwks

import (
	"strings"
	"testing"
)

// Issue 10 item 1: a jku is compared and fetched in one normal form, and
// anything that has no unambiguous normal form is refused.
func TestNormalizeJKU(t *testing.T) {
	tests := []struct {
		in, want string // want "" means refused
		errHas   string
	}{
		{"https://keys.example.com/jwks.json", "https://keys.example.com/jwks.json", ""},
		{"HTTPS://KEYS.Example.com:443/a/./b/../jwks.json", "https://keys.example.com/a/jwks.json", ""},
		{"http://keys.example.com:80", "http://keys.example.com/", ""},
		{"http://keys.example.com:8080/x", "http://keys.example.com:8080/x", ""},
		{"https://keys.example.com/%7euser/%6A%77ks.json", "https://keys.example.com/~user/jwks.json", ""},
		{"https://keys.example.com/a%3ab/jwks.json?v=1", "https://keys.example.com/a%3Ab/jwks.json?v=1", ""},
		{"https://keys.example.com/good/%2e%2e/evil", "https://keys.example.com/evil", ""},
		{"https://keys.example.com/good/.%2E/.%2e/evil", "https://keys.example.com/evil", ""},
		{"https://keys.example.com/a/..", "https://keys.example.com/", ""},
		{"https://[::1]:443/jwks.json", "https://[::1]/jwks.json", ""},
		{"https://keys.example.com/a%2fb", "", "%2F"},
		{"https://keys.example.com/a%2Fb", "", "%2F"},
		{"https://keys.example.com/a%5cb", "", `\`},
		{`https://keys.example.com/a\b`, "", `\`},
		{"https://keys.example.com/a//b", "", "empty segment"},
		{"https://keys.example.com/a/..;/b", "", ";"},
		{"https://keys.example.com/a%25%32%65", "", "%25"},
		{"https://keys.example.com/a%00", "", "control"},
		{"https://keys.example.com/a%zz", "", "escape"},
		{"https://u:p@keys.example.com/", "", "userinfo"},
		{"https://keys.example.com/#x", "", "fragment"},
		{"https://keys.example.com/x#", "", "fragment"},
		{"ftp://keys.example.com/", "", "http"},
		{"//keys.example.com/", "", "http"},
		{"/jwks.json", "", "http"},
		{"https:///jwks.json", "", "host"},
		{"https:keys.example.com", "", "http"},
		{"https://ke%79s.example.com/", "", "escape"},
		{"https://keys.example.com:0x1/", "", ""},
		{"https://[fe80::1%25eth0]/", "", "host"},
		{"https://keys.example.com/a b", "", ""},
	}
	for _, tc := range tests {
		got, err := NormalizeJKU(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("NormalizeJKU(%q) = %q, want an error", tc.in, got)
			} else if !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), "jku") {
				t.Errorf("NormalizeJKU(%q) error %q, want it to name jku and mention %q", tc.in, err, tc.errHas)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("NormalizeJKU(%q) = %v, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestJKUAllowListMatch(t *testing.T) {
	tests := []struct {
		prefix, jku string
		want        bool
	}{
		{"https://h.example/good/", "https://h.example/good/jwks.json", true},
		{"https://h.example/good/", "https://h.example/good/", true},
		{"https://h.example/good/", "https://h.example/good", false},
		{"https://h.example/good/", "https://h.example/goodevil/jwks.json", false},
		{"https://h.example/good", "https://h.example/good", true},
		{"https://h.example/good", "https://h.example/good/jwks.json", true},
		{"https://h.example/good", "https://h.example/good-evil/jwks.json", false},
		{"https://h.example/good", "https://h.example/goodevil", false},
		{"https://h.example", "https://h.example/any/jwks.json", true},
		{"https://h.example", "https://h.example.evil/jwks.json", false},
		{"https://h.example", "http://h.example/jwks.json", false},
		{"https://h.example", "https://h.example:8443/jwks.json", false},
		{"HTTPS://H.EXAMPLE:443/Good/", "https://h.example/Good/jwks.json", true},
		{"https://h.example/Good/", "https://h.example/good/jwks.json", false},
		{"https://h.example/good/", "https://h.example/good/../evil/jwks.json", false},
		{"https://h.example/good/", "https://h.example/good/%2e%2e/evil/jwks.json", false},
	}
	for _, tc := range tests {
		allow, err := ParseJKUAllowList([]string{tc.prefix})
		if err != nil {
			t.Fatalf("ParseJKUAllowList(%q): %v", tc.prefix, err)
		}
		u, err := NormalizeJKU(tc.jku)
		if err != nil {
			t.Fatalf("NormalizeJKU(%q): %v", tc.jku, err)
		}
		if got := allow.Allows(u); got != tc.want {
			t.Errorf("allow %q, jku %q: %v, want %v", tc.prefix, tc.jku, got, tc.want)
		}
	}
	for _, bad := range []string{"", "https://h.example/?q=1", "file:/etc", "https://h.example/%2f"} {
		if _, err := ParseJKUAllowList([]string{bad}); err == nil || !strings.Contains(err.Error(), "allow-jku") {
			t.Errorf("ParseJKUAllowList(%q): %v, want an error naming allow-jku", bad, err)
		}
	}
}

// TestNormalizeJKURefusesLookalikeDotSegments: spellings that some servers
// fold into ".." after the allow-list check has passed.
func TestNormalizeJKURefusesLookalikeDotSegments(t *testing.T) {
	for _, raw := range []string{
		"https://keys.example.com/good/..%3B/evil/jwks.json",
		"https://keys.example.com/good/.../evil/jwks.json",
		"https://keys.example.com/good/..%20/evil/jwks.json",
		"https://keys.example.com/good/.%20./evil/jwks.json",
		"https://keys.example.com/good/%C0%AE%C0%AE/evil/jwks.json",
	} {
		if u, err := NormalizeJKU(raw); err == nil {
			t.Errorf("NormalizeJKU(%s) = %s, want it refused", raw, u)
		}
	}
	for _, ok := range []string{"https://keys.example.com/good/v1.2/jwks.json", "https://keys.example.com/.well-known/jwks.json"} {
		if _, err := NormalizeJKU(ok); err != nil {
			t.Errorf("NormalizeJKU(%s): %v", ok, err)
		}
	}
}
