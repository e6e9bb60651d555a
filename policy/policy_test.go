package policy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/strictjson"
	"go.yaml.in/yaml/v3"
)

// iface is one supportedInterfaces entry of a test card.
type iface struct{ url, binding string }

// load builds a v1.0 card named name with the given interfaces (JSONRPC
// unless a binding is given) and reads it through card.Load, as the daemon
// does.
func load(t testing.TB, name string, ifaces ...iface) strictjson.Value {
	t.Helper()
	var list []string
	for _, f := range ifaces {
		b := f.binding
		if b == "" {
			b = "JSONRPC"
		}
		list = append(list, fmt.Sprintf(`{"url":%s,"protocolBinding":%q,"protocolVersion":"1.0"}`, strconv.Quote(f.url), b))
	}
	return loadJSON(t, fmt.Sprintf(`{
  "name": %s,
  "description": "test agent",
  "supportedInterfaces": [%s],
  "version": "1.0.0",
  "capabilities": {},
  "defaultInputModes": ["text/plain"],
  "defaultOutputModes": ["text/plain"],
  "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}]
}`, strconv.Quote(name), strings.Join(list, ",")))
}

func loadJSON(t testing.TB, s string) strictjson.Value {
	t.Helper()
	l, err := card.Load([]byte(s), card.Options{})
	if err != nil {
		t.Fatalf("card.Load: %v", err)
	}
	return l.Value
}

func urls(us ...string) []iface {
	out := make([]iface, len(us))
	for i, u := range us {
		out[i] = iface{url: u}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func mustCompile(t testing.TB, cfg Config) *Policy {
	t.Helper()
	p, probs := Compile(cfg)
	if len(probs) > 0 {
		t.Fatalf("Compile: %v", probs)
	}
	return p
}

// testConfig is two teams, an admin rule and a staging rule that shares
// team A's pipeline identity but allows plain http to internal hosts.
func testConfig() Config {
	return Config{Rules: []Rule{
		{
			Name:       "team-a",
			Identities: []string{"cert:spiffe://example.org/ci/team-a/*", "token:release-pipeline-a"},
			CardNames:  []string{"team-a-*"},
			Hosts:      []string{"*.team-a.example.com", "team-a.example.com"},
		},
		{
			Name:       "team-b",
			Identities: []string{"cert:spiffe://example.org/ci/team-b/*"},
			CardNames:  []string{"team-b-*"},
			Hosts:      []string{"*.Team-B.example.com"},
		},
		{
			Name:      "admins",
			Roles:     []string{"admin"},
			CardNames: []string{"*"},
			Hosts:     []string{"*.example.com"},
		},
		{
			Name:         "staging",
			Identities:   []string{"token:release-pipeline-a"},
			CardNames:    []string{"team-a-*"},
			Hosts:        []string{"staging.internal", "10.1.2.3", "2001:db8::1"},
			RequireHTTPS: ptr(false),
		},
	}}
}

func TestCheck(t *testing.T) {
	p := mustCompile(t, testConfig())
	teamA := Caller{Identity: "cert:spiffe://example.org/ci/team-a/deploy", Roles: []string{"signer"}}
	pipelineA := Caller{Identity: "token:release-pipeline-a", Roles: []string{"signer"}}
	teamB := Caller{Identity: "cert:spiffe://example.org/ci/team-b/deploy", Roles: []string{"signer"}}
	admin := Caller{Identity: "alice", Roles: []string{"auditor", "admin"}}

	tests := []struct {
		name   string
		caller Caller
		card   string
		ifaces []iface
		want   *Refusal // nil: allowed
	}{
		{"team A signs its card", teamA, "team-a-weather", urls("https://api.team-a.example.com/a2a"), nil},
		{"team A apex host", teamA, "team-a-weather", urls("https://team-a.example.com/a2a"), nil},
		{"several urls all allowed", teamA, "team-a-weather", urls("https://a.team-a.example.com", "https://b.team-a.example.com:8443/x"), nil},
		{"uppercase host and trailing dot", teamA, "team-a-weather", urls("https://API.Team-A.Example.COM./a2a"), nil},
		{"uppercase pattern", teamB, "team-b-x", urls("https://api.team-b.example.com"), nil},
		{"grpc host:port host matches", pipelineA, "team-a-x", []iface{{"staging.internal:443", "GRPC"}}, nil},
		{"no interfaces: name alone", teamA, "team-a-weather", nil, nil},

		{"team B host", teamA, "team-a-weather", urls("https://api.team-b.example.com/a2a"),
			&Refusal{"team-a", "supportedInterfaces[0].url", `host "api.team-b.example.com" is not in hosts [*.team-a.example.com team-a.example.com]`}},
		{"attacker suffix", teamA, "team-a-weather", urls("https://evil.team-a.example.com.attacker.net/a2a"),
			&Refusal{"team-a", "supportedInterfaces[0].url", `host "evil.team-a.example.com.attacker.net" is not in hosts [*.team-a.example.com team-a.example.com]`}},
		{"suffix without a label boundary", teamA, "team-a-weather", urls("https://evilteam-a.example.com/"),
			&Refusal{"team-a", "supportedInterfaces[0].url", `host "evilteam-a.example.com" is not in hosts [*.team-a.example.com team-a.example.com]`}},
		{"userinfo disguise", teamA, "team-a-weather", urls("https://team-a.example.com@evil.net/a2a"),
			&Refusal{"team-a", "supportedInterfaces[0].url", "url has userinfo (a user@ part before the host), which disguises the host it names"}},
		{"userinfo with password", teamA, "team-a-weather", urls("https://team-a.example.com:443@evil.net/a2a"),
			&Refusal{"team-a", "supportedInterfaces[0].url", "url has userinfo (a user@ part before the host), which disguises the host it names"}},
		{"backslash trick does not parse", teamA, "team-a-weather", urls(`https://evil.net\@api.team-a.example.com/`),
			&Refusal{"team-a", "supportedInterfaces[0].url", "url does not parse: net/url: invalid userinfo"}},
		{"http when https required", teamA, "team-a-weather", urls("http://api.team-a.example.com/a2a"),
			&Refusal{"team-a", "supportedInterfaces[0].url", `url scheme "http" is not https`}},
		{"grpc host:port when https required", teamA, "team-a-weather", []iface{{"api.team-a.example.com:443", "GRPC"}},
			&Refusal{"team-a", "supportedInterfaces[0].url", "url is a bare host:port, which names no scheme; write https://host:port"}},
		{"host:port without GRPC has no host", teamA, "team-a-weather", urls("api.team-a.example.com:443"),
			&Refusal{"team-a", "supportedInterfaces[0].url", "url has no host; it must be an absolute URL such as https://agent.example.com/a2a"}},
		{"relative url", teamA, "team-a-weather", urls("/a2a"),
			&Refusal{"team-a", "supportedInterfaces[0].url", "url has no host; it must be an absolute URL such as https://agent.example.com/a2a"}},
		{"name outside card_names", teamA, "team-b-weather", urls("https://api.team-a.example.com/a2a"),
			&Refusal{"team-a", "name", `name "team-b-weather" is not in card_names [team-a-*]`}},
		{"name is case-sensitive", teamA, "Team-A-weather", urls("https://api.team-a.example.com/a2a"),
			&Refusal{"team-a", "name", `name "Team-A-weather" is not in card_names [team-a-*]`}},
		{"second url refused", teamA, "team-a-weather", urls("https://api.team-a.example.com", "https://evil.net"),
			&Refusal{"team-a", "supportedInterfaces[1].url", `host "evil.net" is not in hosts [*.team-a.example.com team-a.example.com]`}},
		{"non-ASCII host", teamA, "team-a-weather", urls("https://tëam.team-a.example.com/"),
			&Refusal{"team-a", "supportedInterfaces[0].url", `host "tëam.team-a.example.com" is neither a DNS name nor an IP address: non-ASCII characters (write internationalised names in their xn-- form)`}},
		{"empty label", teamA, "team-a-weather", urls("https://evil..team-a.example.com/"),
			&Refusal{"team-a", "supportedInterfaces[0].url", `host "evil..team-a.example.com" is neither a DNS name nor an IP address: empty label`}},
		{"IP never matches a wildcard", admin, "x", urls("https://10.1.2.3/"),
			&Refusal{"admins", "supportedInterfaces[0].url", `host "10.1.2.3" is not in hosts [*.example.com]`}},

		{"role-based rule", admin, "team-b-anything", urls("https://api.team-b.example.com"), nil},
		{"role-based rule refuses", admin, "x", urls("https://evil.net"),
			&Refusal{"admins", "supportedInterfaces[0].url", `host "evil.net" is not in hosts [*.example.com]`}},
		{"role not in any rule", Caller{Identity: "bob", Roles: []string{"signer"}}, "team-a-x", urls("https://api.team-a.example.com"),
			&Refusal{"", "", `no signing policy rule applies to caller "bob"`}},
		{"identity glob needs the trailing part", Caller{Identity: "cert:spiffe://example.org/ci/team-a"}, "team-a-x", urls("https://api.team-a.example.com"),
			&Refusal{"", "", `no signing policy rule applies to caller "cert:spiffe://example.org/ci/team-a"`}},
		{"anonymous", Caller{Identity: "anonymous"}, "team-a-x", urls("https://api.team-a.example.com"),
			&Refusal{"", "", `no signing policy rule applies to caller "anonymous"`}},

		{"second rule allows http", pipelineA, "team-a-x", urls("http://staging.internal:8080/a2a"), nil},
		{"second rule allows IPv4", pipelineA, "team-a-x", urls("http://10.1.2.3/a2a"), nil},
		{"second rule allows IPv6 in another spelling", pipelineA, "team-a-x", urls("https://[2001:DB8:0::0:1]:8443/a2a"), nil},
		{"IPv6 elsewhere", pipelineA, "team-a-x", urls("https://[2001:db8::2]/a2a"),
			&Refusal{"team-a", "supportedInterfaces[0].url", `host "2001:db8::2" is not in hosts [*.team-a.example.com team-a.example.com] (1 other applicable rule also refused)`}},
		{"every applicable rule refuses", pipelineA, "team-a-x", urls("http://evil.net/a2a"),
			&Refusal{"team-a", "supportedInterfaces[0].url", `host "evil.net" is not in hosts [*.team-a.example.com team-a.example.com] (1 other applicable rule also refused)`}},
		{"identity and role rules both refuse", Caller{Identity: "token:release-pipeline-a", Roles: []string{"admin"}}, "team-a-x", urls("https://evil.net"),
			&Refusal{"team-a", "supportedInterfaces[0].url", `host "evil.net" is not in hosts [*.team-a.example.com team-a.example.com] (2 other applicable rules also refused)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Check(tt.caller, load(t, tt.card, tt.ifaces...))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check refused: %v", err)
				}
				return
			}
			var got *Refusal
			if !errors.As(err, &got) {
				t.Fatalf("Check = %v (%T), want *Refusal %+v", err, err, *tt.want)
			}
			if *got != *tt.want {
				t.Errorf("Check refused\n got %+v\nwant %+v", *got, *tt.want)
			}
		})
	}
}

// TestCheckCardShapes: cards that skipped lint are refused, not waved through.
func TestCheckCardShapes(t *testing.T) {
	p := mustCompile(t, Config{Rules: []Rule{{Name: "any", Identities: []string{"*"}, CardNames: []string{"*"}, Hosts: []string{"*"}}}})
	tests := []struct {
		name, card string
		want       *Refusal
	}{
		{"minimal", `{"name":"x","supportedInterfaces":[{"url":"https://a.example"}]}`, nil},
		{"null interfaces", `{"name":"x","supportedInterfaces":null}`, nil},
		{"no name", `{"supportedInterfaces":[{"url":"https://a.example"}]}`, &Refusal{"any", "name", "card has no name"}},
		{"numeric name", `{"name":7}`, &Refusal{"any", "name", "name is a number, not a string"}},
		{"interfaces not an array", `{"name":"x","supportedInterfaces":{}}`, &Refusal{"any", "supportedInterfaces", "supportedInterfaces is an object, not an array"}},
		{"interface not an object", `{"name":"x","supportedInterfaces":["https://a.example"]}`, &Refusal{"any", "supportedInterfaces[0]", "interface is a string, not an object"}},
		{"interface without url", `{"name":"x","supportedInterfaces":[{"protocolBinding":"JSONRPC"}]}`, &Refusal{"any", "supportedInterfaces[0].url", "interface has no url"}},
		{"url not a string", `{"name":"x","supportedInterfaces":[{"url":["https://a.example"]}]}`, &Refusal{"any", "supportedInterfaces[0].url", "url is an array, not a string"}},
		{"url control character", `{"name":"x","supportedInterfaces":[{"url":"https://a.example\n.evil"}]}`, &Refusal{"any", "supportedInterfaces[0].url", "url does not parse: net/url: invalid control character in URL"}},
		{"https without host", `{"name":"x","supportedInterfaces":[{"url":"https:opaque"}]}`, &Refusal{"any", "supportedInterfaces[0].url", "url has no host; it must be an absolute URL such as https://agent.example.com/a2a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Check(Caller{Identity: "ci"}, loadJSON(t, tt.card))
			wantRefusal(t, err, tt.want)
		})
	}
}

func TestCheckNoRules(t *testing.T) {
	anyone := Caller{Identity: "anonymous"}
	tests := []struct {
		name   string
		p      *Policy
		ifaces []iface
		want   *Refusal
	}{
		{"default allows https", mustCompile(t, Config{}), urls("https://anywhere.example.net/a2a"), nil},
		{"default refuses http", mustCompile(t, Config{}), urls("https://a.example", "http://b.example"),
			&Refusal{RequireHTTPSRule, "supportedInterfaces[1].url", `url scheme "http" is not https`}},
		{"nil policy is the default", nil, urls("http://b.example"),
			&Refusal{RequireHTTPSRule, "supportedInterfaces[0].url", `url scheme "http" is not https`}},
		{"default refuses grpc host:port", mustCompile(t, Config{}), []iface{{"agent.example.com:443", "GRPC"}},
			&Refusal{RequireHTTPSRule, "supportedInterfaces[0].url", "url is a bare host:port, which names no scheme; write https://host:port"}},
		{"default refuses unparsable", mustCompile(t, Config{}), urls("https://a.example:port/"),
			&Refusal{RequireHTTPSRule, "supportedInterfaces[0].url", `url does not parse: invalid port ":port" after host`}},
		{"explicit true", mustCompile(t, Config{RequireHTTPS: ptr(true)}), urls("ftp://b.example"),
			&Refusal{RequireHTTPSRule, "supportedInterfaces[0].url", `url scheme "ftp" is not https`}},
		{"https not required", mustCompile(t, Config{RequireHTTPS: ptr(false)}), urls("http://b.example", "nonsense"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.p.Empty() {
				t.Fatal("Empty() = false for a policy without rules")
			}
			err := tt.p.Check(anyone, load(t, "any", tt.ifaces...))
			wantRefusal(t, err, tt.want)
		})
	}
}

// TestRuleRequireHTTPS: a rule's require_https overrides the policy-wide
// default both ways.
func TestRuleRequireHTTPS(t *testing.T) {
	rule := func(name string, https *bool) Rule {
		return Rule{Name: name, Identities: []string{"ci"}, CardNames: []string{"*"}, Hosts: []string{"a.example"}, RequireHTTPS: https}
	}
	tests := []struct {
		name    string
		cfg     Config
		allowed bool
	}{
		{"default", Config{Rules: []Rule{rule("r", nil)}}, false},
		{"policy off", Config{RequireHTTPS: ptr(false), Rules: []Rule{rule("r", nil)}}, true},
		{"policy off, rule on", Config{RequireHTTPS: ptr(false), Rules: []Rule{rule("r", ptr(true))}}, false},
		{"policy on, rule off", Config{RequireHTTPS: ptr(true), Rules: []Rule{rule("r", ptr(false))}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mustCompile(t, tt.cfg).Check(Caller{Identity: "ci"}, load(t, "x", urls("http://a.example/")...))
			if got := err == nil; got != tt.allowed {
				t.Errorf("allowed = %v, want %v (err %v)", got, tt.allowed, err)
			}
		})
	}
}

func TestRefusalError(t *testing.T) {
	tests := []struct {
		r    Refusal
		want string
	}{
		{Refusal{"team-a", "supportedInterfaces[1].url", `host "evil.example.net" is not in hosts [*.team-a.example.com]`},
			`signing policy: rule "team-a" refuses supportedInterfaces[1].url: host "evil.example.net" is not in hosts [*.team-a.example.com]`},
		{Refusal{RequireHTTPSRule, "supportedInterfaces[0].url", `url scheme "http" is not https`},
			`signing policy: require_https refuses supportedInterfaces[0].url: url scheme "http" is not https`},
		{Refusal{"", "", `no signing policy rule applies to caller "x"`},
			`signing policy: no signing policy rule applies to caller "x"`},
	}
	for _, tt := range tests {
		if got := tt.r.Error(); got != tt.want {
			t.Errorf("Error() = %s\nwant %s", got, tt.want)
		}
	}
}

// TestRefusalQuotesUntrusted: identities and names come from callers and
// cards; a refusal must not carry their line breaks into logs, nor grow with
// them.
func TestRefusalQuotesUntrusted(t *testing.T) {
	p := mustCompile(t, testConfig())
	err := p.Check(Caller{Identity: "x\nlevel=ERROR forged=1"}, load(t, "n"))
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Check = %q, want a one-line refusal", err)
	}
	long := "team-b-" + strings.Repeat("é", 1000)
	err = p.Check(Caller{Identity: "token:release-pipeline-a"}, load(t, long))
	if err == nil || len(err.Error()) > 400 {
		t.Fatalf("Check = %q (%d bytes), want a short refusal", err, len(fmt.Sprint(err)))
	}
	if r := err.(*Refusal); !strings.Contains(r.Reason, `"team-b-éé`) || !strings.Contains(r.Reason, `…`) {
		t.Errorf("Reason = %q, want the name cut short at a character boundary", r.Reason)
	}
}

func TestCompileProblems(t *testing.T) {
	ok := Rule{Name: "ok", Identities: []string{"ci"}, CardNames: []string{"*"}, Hosts: []string{"*"}}
	with := func(f func(*Rule)) Rule { r := ok; f(&r); return r }
	tests := []struct {
		name  string
		rules []Rule
		want  []string // problem paths, in order
	}{
		{"valid", []Rule{ok}, nil},
		{"roles only", []Rule{with(func(r *Rule) { r.Identities, r.Roles = nil, []string{"signer", "admin", "auditor"} })}, nil},
		{"no name", []Rule{with(func(r *Rule) { r.Name = "" })}, []string{"rules[0].name"}},
		{"reserved name", []Rule{with(func(r *Rule) { r.Name = "require_https" })}, []string{"rules[0].name"}},
		{"duplicate name", []Rule{ok, with(func(r *Rule) { r.Hosts = []string{"a.example"} }), ok}, []string{"rules[1].name", "rules[2].name"}},
		{"applies to nobody", []Rule{with(func(r *Rule) { r.Identities = nil })}, []string{"rules[0]"}},
		{"unknown role", []Rule{with(func(r *Rule) { r.Roles = []string{"signer", "Admin", "root"} })}, []string{"rules[0].roles[1]", "rules[0].roles[2]"}},
		{"empty identity", []Rule{with(func(r *Rule) { r.Identities = []string{"a", ""} })}, []string{"rules[0].identities[1]"}},
		{"spaced identity", []Rule{with(func(r *Rule) { r.Identities = []string{"a "} })}, []string{"rules[0].identities[0]"}},
		{"control character", []Rule{with(func(r *Rule) { r.CardNames = []string{"a\nb", "ok", "\xff"} })}, []string{"rules[0].card_names[0]", "rules[0].card_names[2]"}},
		{"no card names", []Rule{with(func(r *Rule) { r.CardNames = nil })}, []string{"rules[0].card_names"}},
		{"empty card name", []Rule{with(func(r *Rule) { r.CardNames = []string{""} })}, []string{"rules[0].card_names[0]"}},
		{"no hosts", []Rule{with(func(r *Rule) { r.Hosts = []string{} })}, []string{"rules[0].hosts"}},
		{"bad hosts", []Rule{with(func(r *Rule) {
			r.Hosts = []string{"a.example", "https://a.example", "a.example:443", "a.example/x", "*a.example", "a.*.example", "*", "[::1]", ""}
		})}, []string{"rules[0].hosts[1]", "rules[0].hosts[2]", "rules[0].hosts[3]", "rules[0].hosts[4]", "rules[0].hosts[5]", "rules[0].hosts[7]", "rules[0].hosts[8]"}},
		{"every problem reported", []Rule{ok, {Name: "ok", Roles: []string{"owner"}, Hosts: []string{"*.*.example"}}},
			[]string{"rules[1].name", "rules[1].roles[0]", "rules[1].card_names", "rules[1].hosts[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, probs := Compile(Config{Rules: tt.rules})
			var got []string
			for _, pr := range probs {
				got = append(got, pr.Path)
				if pr.Message == "" {
					t.Errorf("problem at %s has no message", pr.Path)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("problem paths = %q, want %q\n%v", got, tt.want, probs)
			}
			if (p == nil) != (len(tt.want) > 0) {
				t.Errorf("Compile returned policy %v with %d problems", p, len(probs))
			}
		})
	}
}

func TestCompileCopiesConfig(t *testing.T) {
	cfg := Config{Rules: []Rule{{Name: "r", Identities: []string{"ci"}, CardNames: []string{"a"}, Hosts: []string{"a.example"}}}}
	p := mustCompile(t, cfg)
	cfg.Rules[0].Identities[0] = "*"
	cfg.Rules[0].CardNames[0] = "*"
	if err := p.Check(Caller{Identity: "other"}, load(t, "b", urls("https://a.example")...)); err == nil {
		t.Fatal("editing the Config after Compile changed the policy")
	}
}

func TestEmpty(t *testing.T) {
	if mustCompile(t, testConfig()).Empty() {
		t.Error("Empty() = true for a policy with rules")
	}
	if !mustCompile(t, Config{RequireHTTPS: ptr(false)}).Empty() {
		t.Error("Empty() = false for a policy without rules")
	}
}

// readmeExample is the policy section shown in the README; this test keeps
// it valid and meaning what the README says.
const readmeExample = `
policy:
  require_https: true          # default; every supportedInterfaces[].url must be https
  rules:
    - name: team-a
      identities: ["cert:spiffe://example.org/ci/team-a/*", "token:release-pipeline-a"]
      card_names: ["team-a-*"]
      hosts: ["*.team-a.example.com", "team-a.example.com"]
    - name: team-a-staging
      identities: ["token:release-pipeline-a"]
      card_names: ["team-a-*"]
      hosts: ["staging.internal", "10.20.0.7", "2001:db8::7"]
      require_https: false     # plain http allowed for these hosts only
    - name: platform-admins
      roles: [admin]
      card_names: ["*"]
      hosts: ["*.example.com"]
`

func TestReadmeExample(t *testing.T) {
	var doc struct {
		Policy Config `yaml:"policy"`
	}
	dec := yaml.NewDecoder(strings.NewReader(readmeExample))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	p := mustCompile(t, doc.Policy)
	tests := []struct {
		caller  Caller
		name    string
		url     string
		allowed bool
	}{
		{Caller{Identity: "cert:spiffe://example.org/ci/team-a/release"}, "team-a-weather", "https://weather.team-a.example.com/a2a", true},
		{Caller{Identity: "cert:spiffe://example.org/ci/team-a/release"}, "team-a-weather", "http://staging.internal/a2a", false},
		{Caller{Identity: "token:release-pipeline-a"}, "team-a-weather", "http://staging.internal/a2a", true},
		{Caller{Identity: "token:release-pipeline-a"}, "team-a-weather", "http://weather.team-a.example.com/a2a", false},
		{Caller{Identity: "token:release-pipeline-a"}, "team-b-weather", "https://weather.team-a.example.com/a2a", false},
		{Caller{Identity: "ops", Roles: []string{"admin"}}, "team-b-weather", "https://weather.team-b.example.com/a2a", true},
		{Caller{Identity: "ops", Roles: []string{"signer"}}, "team-b-weather", "https://weather.team-b.example.com/a2a", false},
	}
	for _, tt := range tests {
		err := p.Check(tt.caller, load(t, tt.name, urls(tt.url)...))
		if got := err == nil; got != tt.allowed {
			t.Errorf("%s signing %s at %s: allowed = %v, want %v (%v)", tt.caller.Identity, tt.name, tt.url, got, tt.allowed, err)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	p := mustCompile(b, testConfig())
	v := load(b, "team-a-weather", urls("https://api.team-a.example.com/a2a", "https://eu.team-a.example.com/a2a")...)
	c := Caller{Identity: "cert:spiffe://example.org/ci/team-a/deploy", Roles: []string{"signer"}}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Check(c, v); err != nil {
			b.Fatal(err)
		}
	}
}

// wantRefusal fails t unless err is nil for a nil want, or a *Refusal
// equal to want.
func wantRefusal(t *testing.T, err error, want *Refusal) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("Check refused: %v", err)
		}
		return
	}
	got, ok := err.(*Refusal)
	if !ok {
		t.Fatalf("Check = %v (%T), want *Refusal", err, err)
	}
	if *got != *want {
		t.Errorf("Check refused\n got %+v\nwant %+v", *got, *want)
	}
}
