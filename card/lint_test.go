package card

import (
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/strictjson"
)

const baseCard = `{
  "name": "Weather Agent",
  "description": "Forecasts",
  "supportedInterfaces": [{"url": "https://weather.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
  "version": "1.0.0",
  "capabilities": {"streaming": true},
  "defaultInputModes": ["text/plain"],
  "defaultOutputModes": ["text/plain"],
  "skills": [{"id": "forecast", "name": "Forecast", "description": "Daily forecast", "tags": ["weather"]}]
}`

// withMembers returns baseCard with top-level members replaced or added
// (JSON values), or removed (value "").
func withMembers(t testing.TB, kv ...string) []byte {
	t.Helper()
	v, err := Parse([]byte(baseCard), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			v = v.Without(kv[i])
			continue
		}
		w, err := strictjson.Parse([]byte(`{"x":`+kv[i+1]+`}`), strictjson.Limits{}) // test values: no card caps
		if err != nil {
			t.Fatalf("bad test value for %s: %v", kv[i], err)
		}
		x, _ := w.Get("x")
		v = v.With(kv[i], x)
	}
	return v.Compact()
}

func lintOf(t *testing.T, data []byte) []Finding {
	t.Helper()
	l, err := Load(data, Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return Lint(l.Value)
}

func TestLintBaseCardIsClean(t *testing.T) {
	if fs := lintOf(t, withMembers(t)); len(fs) != 0 {
		t.Fatalf("base card has findings: %v", fs)
	}
}

func TestLintFindings(t *testing.T) {
	tests := []struct {
		name     string
		card     []byte
		path     string
		rule     string
		severity Severity
	}{
		{"missing name", withMembers(t, "name", ""), "name", RuleRequired, SeverityError},
		{"empty description", withMembers(t, "description", `""`), "description", RuleRequired, SeverityError},
		{"missing version", withMembers(t, "version", ""), "version", RuleRequired, SeverityError},
		{"missing capabilities", withMembers(t, "capabilities", ""), "capabilities", RuleRequired, SeverityError},
		{"empty skills", withMembers(t, "skills", `[]`), "skills", RuleRequired, SeverityError},
		{"empty interfaces", withMembers(t, "supportedInterfaces", `[]`), "supportedInterfaces", RuleRequired, SeverityError},
		{"missing input modes", withMembers(t, "defaultInputModes", ""), "defaultInputModes", RuleRequired, SeverityError},
		{"skill without tags", withMembers(t, "skills", `[{"id":"a","name":"A","description":"d"}]`), "skills[0].tags", RuleRequired, SeverityError},
		{"skill tags holding only empty strings", withMembers(t, "skills", `[{"id":"a","name":"A","description":"d","tags":[""]}]`), "skills[0].tags", RuleRequired, SeverityError},
		{"url without host", withMembers(t, "documentationUrl", `"https://:443/docs"`), "documentationUrl", RuleURL, SeverityError},
		{"skill empty tags", withMembers(t, "skills", `[{"id":"a","name":"A","description":"d","tags":[]}]`), "skills[0].tags", RuleRequired, SeverityError},
		{"interface without version", withMembers(t, "supportedInterfaces", `[{"url":"https://a.example","protocolBinding":"JSONRPC"}]`), "supportedInterfaces[0].protocolVersion", RuleRequired, SeverityError},
		{"provider without organization", withMembers(t, "provider", `{"url":"https://example.com"}`), "provider.organization", RuleRequired, SeverityError},
		{"apiKey without location", withMembers(t, "securitySchemes", `{"k":{"apiKeySecurityScheme":{"name":"X-Key"}}}`), "securitySchemes.k.apiKeySecurityScheme.location", RuleRequired, SeverityError},
		{"oauth flow without scopes", withMembers(t, "securitySchemes", `{"o":{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"https://t.example"}}}}}`), "securitySchemes.o.oauth2SecurityScheme.flows.clientCredentials.scopes", RuleRequired, SeverityError},

		{"name is a number", withMembers(t, "name", `42`), "name", RuleType, SeverityError},
		{"name is null", withMembers(t, "name", `null`), "name", RuleType, SeverityError},
		{"streaming is a string", withMembers(t, "capabilities", `{"streaming":"yes"}`), "capabilities.streaming", RuleType, SeverityError},
		{"skills is an object", withMembers(t, "skills", `{"id":"a"}`), "skills", RuleType, SeverityError},
		{"tag is a number", withMembers(t, "skills", `[{"id":"a","name":"A","description":"d","tags":["x",3]}]`), "skills[0].tags[1]", RuleType, SeverityError},
		{"skill is a string", withMembers(t, "skills", `["forecast"]`), "skills[0]", RuleType, SeverityError},
		{"params is an array", withMembers(t, "capabilities", `{"extensions":[{"uri":"urn:x","params":[1]}]}`), "capabilities.extensions[0].params", RuleType, SeverityError},
		{"scope is a number", withMembers(t, "securitySchemes", `{"o":{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"https://t.example","scopes":{"read":1}}}}}}`), "securitySchemes.o.oauth2SecurityScheme.flows.clientCredentials.scopes.read", RuleType, SeverityError},
		{"scheme list not array", withMembers(t, "securityRequirements", `[{"schemes":{"k":{"list":"read"}}}]`), "securityRequirements[0].schemes.k.list", RuleType, SeverityError},

		{"unknown top-level key", withMembers(t, "color", `"blue"`), "color", RuleUnknownField, SeverityError},
		{"unknown nested key", withMembers(t, "skills", `[{"id":"a","name":"A","description":"d","tags":["t"],"priority":1}]`), "skills[0].priority", RuleUnknownField, SeverityError},
		{"snake_case alias", withMembers(t, "supportedInterfaces", `[{"url":"https://a.example","protocol_binding":"JSONRPC","protocolVersion":"1.0"}]`), "supportedInterfaces[0].protocol_binding", RuleUnknownField, SeverityError},
		{"v0.3 member in v1.0 card", withMembers(t, "security", `[{"k":[]}]`), "security", RuleUnknownField, SeverityError},
		{"stateTransitionHistory", withMembers(t, "capabilities", `{"stateTransitionHistory":true}`), "capabilities.stateTransitionHistory", RuleUnknownField, SeverityError},

		{"two security scheme cases", withMembers(t, "securitySchemes", `{"k":{"mtlsSecurityScheme":{},"httpAuthSecurityScheme":{"scheme":"bearer"}}}`), "securitySchemes.k", RuleOneof, SeverityError},
		{"no security scheme case", withMembers(t, "securitySchemes", `{"k":{}}`), "securitySchemes.k", RuleOneof, SeverityError},
		{"no oauth flow", withMembers(t, "securitySchemes", `{"o":{"oauth2SecurityScheme":{"flows":{}}}}`), "securitySchemes.o.oauth2SecurityScheme.flows", RuleOneof, SeverityError},

		{"http interface url", withMembers(t, "supportedInterfaces", `[{"url":"http://weather.example.com/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]`), "supportedInterfaces[0].url", RuleURL, SeverityError},
		{"http loopback url warns", withMembers(t, "supportedInterfaces", `[{"url":"http://127.0.0.1:8080/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]`), "supportedInterfaces[0].url", RuleURL, SeverityWarning},
		{"http localhost warns", withMembers(t, "supportedInterfaces", `[{"url":"http://localhost/a2a","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}]`), "supportedInterfaces[0].url", RuleURL, SeverityWarning},
		{"relative url", withMembers(t, "iconUrl", `"/icon.png"`), "iconUrl", RuleURL, SeverityError},
		{"ftp url", withMembers(t, "documentationUrl", `"ftp://docs.example.com/"`), "documentationUrl", RuleURL, SeverityError},
		{"credentials in url", withMembers(t, "documentationUrl", `"https://user:pw@docs.example.com/"`), "documentationUrl", RuleURL, SeverityError},
		{"host:port only for GRPC", withMembers(t, "supportedInterfaces", `[{"url":"agent.example.com:443","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]`), "supportedInterfaces[0].url", RuleURL, SeverityError},
		{"http provider url", withMembers(t, "provider", `{"url":"http://example.com","organization":"Ex"}`), "provider.url", RuleURL, SeverityError},
		{"oidc url not https", withMembers(t, "securitySchemes", `{"g":{"openIdConnectSecurityScheme":{"openIdConnectUrl":"http://id.example.com/.well-known/openid-configuration"}}}`), "securitySchemes.g.openIdConnectSecurityScheme.openIdConnectUrl", RuleURL, SeverityError},
		{"custom binding warns", withMembers(t, "supportedInterfaces", `[{"url":"https://a.example","protocolBinding":"CARRIER-PIGEON","protocolVersion":"1.0"}]`), "supportedInterfaces[0].protocolBinding", RuleBinding, SeverityWarning},

		{"__proto__ in params", withMembers(t, "capabilities", `{"extensions":[{"uri":"urn:x","params":{"__proto__":{"a":1}}}]}`), "capabilities.extensions[0].params.__proto__", RulePortability, SeverityError},
		{"__proto__ scheme name", withMembers(t, "securitySchemes", `{"__proto__":{"mtlsSecurityScheme":{"description":"m"}}}`), "securitySchemes.__proto__", RulePortability, SeverityError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := lintOf(t, tc.card)
			for _, f := range fs {
				if f.Path == tc.path && f.Rule == tc.rule && f.Severity == tc.severity {
					if f.Message == "" || strings.Contains(f.Message, "\n") {
						t.Fatalf("finding message must be one line: %q", f.Message)
					}
					return
				}
			}
			t.Fatalf("want %s %s [%s]; got %v", tc.severity, tc.path, tc.rule, fs)
		})
	}
}

func TestLintAccepts(t *testing.T) {
	tests := []struct {
		name string
		card []byte
	}{
		{"grpc host:port", withMembers(t, "supportedInterfaces", `[{"url":"agent.example.com:443","protocolBinding":"GRPC","protocolVersion":"1.0"}]`)},
		{"grpc https", withMembers(t, "supportedInterfaces", `[{"url":"https://agent.example.com","protocolBinding":"GRPC","protocolVersion":"1.0"}]`)},
		{"empty capabilities", withMembers(t, "capabilities", `{}`)},
		{"mtls scheme without description", withMembers(t, "securitySchemes", `{"m":{"mtlsSecurityScheme":{}}}`)},
		{"scope-less requirement", withMembers(t, "securityRequirements", `[{"schemes":{"m":{}}}]`)},
		{"params anything", withMembers(t, "capabilities", `{"extensions":[{"uri":"urn:x","params":{"a":null,"b":[],"c":{"d":1.5e3}}}]}`)},
		{"full oauth", withMembers(t, "securitySchemes", `{"o":{"oauth2SecurityScheme":{"description":"d","flows":{"authorizationCode":{"authorizationUrl":"https://a.example/auth","tokenUrl":"https://a.example/token","scopes":{"read":"Read"},"pkceRequired":true}},"oauth2MetadataUrl":"https://a.example/.well-known/oauth-authorization-server"}}}`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range lintOf(t, tc.card) {
				if f.Severity == SeverityError {
					t.Fatalf("unexpected error finding: %v", f)
				}
			}
		})
	}
}

func TestStripUnknown(t *testing.T) {
	data := withMembers(t,
		"color", `"blue"`,
		"skills", `[{"id":"a","name":"A","description":"d","tags":["t"],"priority":1}]`,
		"capabilities", `{"streaming":true,"extensions":[{"uri":"urn:x","params":{"keep":"me"}}],"stateTransitionHistory":false}`,
	)
	l, err := Load(data, Options{StripUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"capabilities.stateTransitionHistory", "skills[0].priority", "color"}
	slices.Sort(want)
	got := slices.Clone(l.Stripped)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("stripped %v, want %v", got, want)
	}
	if fs := Lint(l.Value); HasErrors(fs) {
		t.Fatalf("stripped card still fails lint: %v", fs)
	}
	if !strings.Contains(string(l.Value.Compact()), `"params":{"keep":"me"}`) {
		t.Fatalf("free-form params must not be stripped: %s", l.Value.Compact())
	}
}

func TestLintNeverEchoesURLCredentials(t *testing.T) {
	for _, u := range []string{`"https://user:s3cret%zz@docs.example.com/"`, `"https://user:s3cret@docs.example.com/"`, `"ftp://user:s3cret@docs.example.com/"`} {
		for _, f := range lintOf(t, withMembers(t, "documentationUrl", u)) {
			if strings.Contains(f.String(), "s3cret") {
				t.Errorf("finding repeats a password: %s", f)
			}
		}
	}
}

// TestLintFindingsAreBounded: a 180 KB card of 60,000 empty skills must not
// turn into hundreds of thousands of findings (it grew the daemon by 500 MB
// and overflowed the gRPC error headers): the first MaxFindings are kept and
// one more counts the rest.
func TestLintFindingsAreBounded(t *testing.T) {
	data := withMembers(t, "skills", "["+strings.TrimSuffix(strings.Repeat("{},", 60000), ",")+"]")
	// The parser's item cap refuses such a card by default; with the caps
	// raised, Lint must still bound what it reports.
	l, err := Load(data, Options{Limits: strictjson.Limits{MaxItems: 60000, MaxValues: 70000}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fs := Lint(l.Value)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(fs) != MaxFindings+1 {
		t.Fatalf("%d findings, want the first %d and one that counts the rest", len(fs), MaxFindings)
	}
	last := fs[len(fs)-1]
	if last.Rule != RuleTooManyFindings || last.Severity != SeverityError || !strings.Contains(last.Message, "more findings") {
		t.Fatalf("last finding %v, want a %s error counting the rest", last, RuleTooManyFindings)
	}
	// Every empty skill lacks its REQUIRED id, name, description and tags.
	var more int
	if _, err := fmt.Sscanf(last.Message, "and %d more", &more); err != nil || more < 60000*4-MaxFindings {
		t.Fatalf("last finding %q does not count the %d findings past the first %d", last.Message, 60000*4-MaxFindings, MaxFindings)
	}
	// What the findings keep alive, not the garbage of walking the card.
	if kept := int64(after.HeapAlloc) - int64(before.HeapAlloc); kept > 4<<20 {
		t.Fatalf("Lint's findings hold %d MiB for a %d KB card", kept>>20, len(data)>>10)
	}
	runtime.KeepAlive(fs)
	msg := (&LintError{Findings: fs}).Error()
	if len(msg) > 4<<10 || !strings.Contains(msg, "and 90 more listed in the findings") || !strings.Contains(msg, RuleTooManyFindings) {
		t.Fatalf("LintError.Error is %d bytes and must list 10 errors, count the rest and say findings were dropped: %.300s…", len(msg), msg)
	}
}

func TestLintRefusesNULInAuditedFields(t *testing.T) {
	for _, field := range []string{"name", "version"} {
		raw := `{"name":"A","description":"d","supportedInterfaces":[{"url":"https://a.example","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`
		raw = strings.Replace(raw, `"`+field+`":"`, `"`+field+`":"x\u0000`, 1)
		v, err := strictjson.Parse([]byte(raw), strictjson.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		var got []Finding
		for _, f := range Lint(v) {
			if f.Rule == RuleNUL {
				got = append(got, f)
			}
		}
		if len(got) != 1 || got[0].Path != field || got[0].Severity != SeverityError {
			t.Fatalf("%s with U+0000: findings %+v, want one %s error at %s", field, got, RuleNUL, field)
		}
	}
}

// TestPlainHTTPS: the URLs the linter passes without parsing are ones
// url.Parse reads as https with a host and no user, and the others go to
// the general path.
func TestPlainHTTPS(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"https://weather.example.com/a2a", true},
		{"https://a.example:8443/x?y=1#z", true},
		{"https://a.example", true},
		{"https://a/@x", true},
		{"https://:443/docs", false},
		{"https://user:pw@docs.example.com/", false},
		{"https://A.example/", false},
		{"https://a.example/%zz", false},
		{"https://a.example/a b", false},
		{"https://[::1]/", false},
		{"http://a.example/", false},
		{"https://a.example:x/", false},
		{"https://", false},
	} {
		if got := plainHTTPS(tt.in); got != tt.want {
			t.Errorf("plainHTTPS(%q) = %v, want %v", tt.in, got, tt.want)
		}
		checkPlainHTTPS(t, tt.in)
	}
}

// checkPlainHTTPS fails when plainHTTPS passes s but the general path of
// linter.url would report something.
func checkPlainHTTPS(t *testing.T, s string) {
	t.Helper()
	if !plainHTTPS(s) {
		return
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" || u.User != nil {
		t.Errorf("plainHTTPS(%q) passes what url.Parse reads as %+v, %v", s, u, err)
	}
}

func FuzzPlainHTTPS(f *testing.F) {
	for _, s := range []string{"https://a.example/x", "https://a:1/?#", "https://a/@b", "https://a.b-c:443/p;q"} {
		f.Add(s)
	}
	f.Fuzz(checkPlainHTTPS)
}
