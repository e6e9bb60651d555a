package policy

import (
	"strings"
	"testing"
)

func TestParseHostPattern(t *testing.T) {
	tests := []struct {
		pattern string
		want    hostPattern
		problem string // substring of the problem; "" when valid
	}{
		{"*", hostPattern{kind: anyHost}, ""},
		{"team-a.example.com", hostPattern{kind: exactHost, name: "team-a.example.com"}, ""},
		{"Team-A.Example.COM.", hostPattern{kind: exactHost, name: "team-a.example.com"}, ""},
		{"*.team-a.example.com", hostPattern{kind: suffixHost, name: ".team-a.example.com"}, ""},
		{"*.EXAMPLE.com.", hostPattern{kind: suffixHost, name: ".example.com"}, ""},
		{"my_host.internal", hostPattern{kind: exactHost, name: "my_host.internal"}, ""},
		{"localhost", hostPattern{kind: exactHost, name: "localhost"}, ""},
		{"", hostPattern{}, "empty"},
		{"https://a.example", hostPattern{}, "scheme"},
		{"a.example:443", hostPattern{}, "port"},
		{"a.example/a2a", hostPattern{}, "path"},
		{"a.example?x", hostPattern{}, "path"},
		{"user@a.example", hostPattern{}, "userinfo"},
		{"[2001:db8::1]", hostPattern{}, "without brackets"},
		{"fe80::1%eth0", hostPattern{}, "zone"},
		{"*example.com", hostPattern{}, "whole first label"},
		{"a*.example.com", hostPattern{}, "whole first label"},
		{"*.*.example.com", hostPattern{}, "whole first label"},
		{"a.*.example.com", hostPattern{}, "whole first label"},
		{"10.0.0.*", hostPattern{}, "whole first label"},
		{"*.", hostPattern{}, "whole first label"},
		{".example.com", hostPattern{}, "empty label"},
		{"a..example.com", hostPattern{}, "empty label"},
		{"-a.example.com", hostPattern{}, "'-'"},
		{"a b.example.com", hostPattern{}, "not allowed"},
		{"tëam.example.com", hostPattern{}, "xn--"},
		{strings.Repeat("a", 64) + ".example.com", hostPattern{}, "63"},
		{strings.Repeat("a.", 127) + "com", hostPattern{}, "253"},
	}
	for _, tt := range tests {
		got, problem := parseHostPattern(tt.pattern)
		if tt.problem == "" {
			if problem != "" || got != tt.want {
				t.Errorf("parseHostPattern(%q) = %+v, %q; want %+v", tt.pattern, got, problem, tt.want)
			}
			continue
		}
		if !strings.Contains(problem, tt.problem) {
			t.Errorf("parseHostPattern(%q) problem = %q, want it to mention %q", tt.pattern, problem, tt.problem)
		}
	}
}

// TestHostMatch: for each pattern, interface URLs whose host it matches and
// URLs whose host it does not.
func TestHostMatch(t *testing.T) {
	tests := []struct {
		pattern        string
		match, noMatch []string
	}{
		{"*", []string{"https://anything.example/", "https://[::1]/"}, nil},
		{"a.example.com", []string{"https://a.example.com/", "https://A.EXAMPLE.COM./"}, []string{"https://b.a.example.com/"}},
		{"*.example.com", []string{"https://a.example.com/", "https://a.b.example.com:8443/"},
			[]string{"https://example.com/", "https://.example.com/", "https://badexample.com/", "https://a.example.com.evil.net/"}},
		{"10.0.0.1", []string{"https://10.0.0.1:443/", "https://[::ffff:10.0.0.1]/"}, []string{"https://10.0.0.10/"}}, // [::ffff:10.0.0.1] is the same address
		{"::ffff:10.0.0.1", []string{"https://10.0.0.1/"}, nil},
		{"2001:db8::1", []string{"https://[2001:0DB8:0000::1]/"}, []string{"https://[2001:db8::1%25eth0]/"}},
		{"*.0.0.1", nil, []string{"https://10.0.0.1/"}}, // wildcards are for names, not addresses
		{"1.example.com", []string{"https://1.example.com/"}, nil},
	}
	for _, tt := range tests {
		h, problem := parseHostPattern(tt.pattern)
		if problem != "" {
			t.Fatalf("parseHostPattern(%q): %s", tt.pattern, problem)
		}
		for want, urls := range map[bool][]string{true: tt.match, false: tt.noMatch} {
			for _, url := range urls {
				ifaces, _ := load(t, "x", iface{url: url}).Get("supportedInterfaces")
				tg := analyse(0, ifaces.Arr[0])
				if got := tg.hostBad == "" && tg.matches(h); got != want {
					t.Errorf("host %q (from %s) matches %q = %v, want %v (%s)", tg.host, url, tt.pattern, got, want, tg.hostBad)
				}
			}
		}
	}
}
