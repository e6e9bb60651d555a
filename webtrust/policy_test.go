package webtrust

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// examplePolicy is docs/ai-catalog.md's example (paths made to exist below).
const examplePolicy = `# trust.yaml
rules:
  - host: agents.example.com
    did: did:web:example.com
    revocations: https://example.com/.well-known/cardsign-revocations.json
    max_revocations_age: 24h
    log_key: https://example.com/.well-known/cardsign-log-key
    require_log_proof: true
    witnesses: https://example.com/witnesses.txt
    witness_quorum: 2
    catalog_signer: did:web:example.com
  - host: "*.partner.example"
    jwks: partner-jwks.json
  - host: catalog.example
    jwks: https://catalog.example/.well-known/jwks.json
`

func TestParsePolicy(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "partner-jwks.json"), []byte(`{"keys":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "trust.yaml")
	p, err := ParsePolicy(name, []byte(examplePolicy))
	if err != nil {
		t.Fatal(err)
	}
	r := p.Rules[0]
	if len(p.Rules) != 3 || r.Host != "agents.example.com" || r.DID != "did:web:example.com" || r.MaxRevocationsAge != 24*time.Hour ||
		!r.RequireLogProof || r.CatalogSigner != "did:web:example.com" || r.Line != 3 ||
		r.Witnesses != "https://example.com/witnesses.txt" || r.WitnessQuorum != 2 {
		t.Errorf("rule 0: %+v", r)
	}
	if got := p.Rules[1].JWKS; got != filepath.Join(dir, "partner-jwks.json") {
		t.Errorf("relative jwks file: %q", got)
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", "rules:\n  - host: a.example\n    jwk: x.json\n", "trust.yaml:3: rules[0].jwk: unknown field"},
		{"unknown top-level field", "rule:\n  - host: a.example\n", "trust.yaml:1: rule: unknown field"},
		{"two anchors", "rules:\n  - host: a.example\n    did: did:web:a.example\n    jwks: https://a.example/jwks.json\n", "trust.yaml:2: rules[0]: give exactly one of jwks"},
		{"no anchor", "rules:\n  - host: a.example\n", "give exactly one of jwks"},
		{"no host", "rules:\n  - did: did:web:a.example\n", "rules[0].host: missing"},
		{"bad pattern: inner wildcard", "rules:\n  - host: a.*.example\n    did: did:web:a.example\n", "rules[0].host: \"a.*.example\": a wildcard is allowed only"},
		{"bad pattern: partial wildcard", "rules:\n  - host: \"*a.example\"\n    did: did:web:a.example\n", "wildcard"},
		{"bad pattern: single label", "rules:\n  - host: localhost\n    did: did:web:a.example\n", "single label"},
		{"bad pattern: IP", "rules:\n  - host: 10.0.0.1\n    did: did:web:a.example\n", "IP address"},
		{"bad pattern: upper case", "rules:\n  - host: A.example\n    did: did:web:a.example\n", "lowercase"},
		{"missing file", "rules:\n  - host: a.example\n    jwks: nowhere.json\n", "trust.yaml:3: rules[0].jwks: \"nowhere.json\": no such file"},
		{"http URL", "rules:\n  - host: a.example\n    jwks: http://a.example/jwks.json\n", "must be https"},
		{"non-root did", "rules:\n  - host: a.example\n    did: did:web:a.example:users:x\n", "rules[0].did"},
		{"did with port", "rules:\n  - host: a.example\n    did: did:web:a.example%3A8443\n", "port"},
		{"bad duration", "rules:\n  - host: a.example\n    did: did:web:a.example\n    revocations: https://a.example/r.json\n    max_revocations_age: soon\n", "max_revocations_age: \"soon\""},
		{"age without revocations", "rules:\n  - host: a.example\n    did: did:web:a.example\n    max_revocations_age: 1h\n", "set without revocations"},
		{"proof without log key", "rules:\n  - host: a.example\n    did: did:web:a.example\n    require_log_proof: true\n", "needs log_key"},
		{"not a bool", "rules:\n  - host: a.example\n    did: did:web:a.example\n    require_log_proof: maybe\n", "rules[0].require_log_proof"},
		{"witnesses without log key", "rules:\n  - host: a.example\n    did: did:web:a.example\n    witnesses: https://a.example/witnesses.txt\n", "rules[0].witnesses: needs log_key"},
		{"quorum without witnesses", "rules:\n  - host: a.example\n    did: did:web:a.example\n    log_key: https://a.example/k\n    witness_quorum: 2\n", "set without witnesses"},
		{"quorum zero", "rules:\n  - host: a.example\n    did: did:web:a.example\n    log_key: https://a.example/k\n    witnesses: https://a.example/w\n    witness_quorum: 0\n", "at least 1"},
		{"witnesses file missing", "rules:\n  - host: a.example\n    did: did:web:a.example\n    log_key: https://a.example/k\n    witnesses: nowhere.txt\n", "rules[0].witnesses"},
		{"field twice", "rules:\n  - host: a.example\n    host: b.example\n    did: did:web:a.example\n", "host"},
		{"a list where a value goes", "rules:\n  - host: [a.example]\n    did: did:web:a.example\n", "rules[0].host: want a single value"},
		{"no rules", "rules: []\n", "no rules"},
		{"empty", "", "empty"},
		{"not YAML", "rules: [\n", "trust.yaml"},
		{"rules not a list", "rules: {}\n", "rules: want a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicy(name, []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadPolicyMissing(t *testing.T) {
	_, err := LoadPolicy(filepath.Join(t.TempDir(), "absent.yaml"))
	if err == nil || !strings.Contains(err.Error(), "absent.yaml") {
		t.Fatalf("%v", err)
	}
	if _, err := LoadPolicy(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a directory: %v", err)
	}
}

func TestPolicyMatch(t *testing.T) {
	p := &Policy{Rules: []Rule{
		{Host: "agents.example.com", Line: 1},
		{Host: "*.example.com", Line: 2},
		{Host: "example.com", Line: 3},
	}}
	for host, line := range map[string]int{
		"agents.example.com":  1,
		"AGENTS.example.com.": 1,
		"a.b.example.com":     2,
		"example.com":         3,
		"notexample.com":      0,
		"example.com.evil.io": 0,
	} {
		r := p.Match(host)
		if (r == nil && line != 0) || (r != nil && r.Line != line) {
			t.Errorf("%s: %+v, want the rule of line %d", host, r, line)
		}
	}
	var none *Policy
	if none.Match("a.example") != nil {
		t.Error("a nil policy matches")
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(examplePolicy))
	f.Add([]byte("rules:\n  - host: a.example\n    did: did:web:a.example\n"))
	f.Add([]byte("rules:\n  - host: '*.a.example'\n    jwks: https://a.example/j\n    revocations: https://a.example/r\n    max_revocations_age: 1h\n"))
	f.Add([]byte("rules: [{host: a.example, did: did:web:a.example, log_key: x+1+AAAA}]"))
	f.Add([]byte("&a [*a]"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(filepath.Join(dir, "trust.yaml"), data)
		if err != nil {
			if p != nil {
				t.Fatal("a policy and an error")
			}
			return
		}
		for _, r := range p.Rules {
			if r.Host == "" || (r.JWKS == "") == (r.DID == "") || r.Line <= 0 {
				t.Fatalf("accepted an invalid rule %+v", r)
			}
			if r.RequireLogProof && r.LogKey == "" {
				t.Fatalf("require_log_proof without log_key: %+v", r)
			}
		}
	})
}
