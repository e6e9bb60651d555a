package card

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/cardsign/cardsign/strictjson"
)

func canon(t *testing.T, in string, p Profile) string {
	t.Helper()
	l, err := Load([]byte(in), Options{})
	if err != nil {
		t.Fatalf("Load(%s): %v", in, err)
	}
	out, err := Canonical(l.Value, p)
	if err != nil {
		t.Fatalf("Canonical(%s): %v", in, err)
	}
	return string(out)
}

// The worked example of A2A v1.0 §8.4.1.
func TestCanonicalSpecWorkedExample(t *testing.T) {
	in := `{"name":"Example Agent","description":"","capabilities":{"streaming":false,"pushNotifications":false,"extensions":[]},"skills":[]}`
	want := `{"capabilities":{"pushNotifications":false,"streaming":false},"description":"","name":"Example Agent","skills":[]}`
	if got := canon(t, in, ProfileSpec); got != want {
		t.Fatalf("spec canonical form:\n got %s\nwant %s", got, want)
	}
}

func TestCanonicalProfiles(t *testing.T) {
	tests := []struct {
		name, in  string
		spec, sdk string
	}{
		{"optional false kept by both",
			`{"capabilities":{"streaming":false}}`,
			`{"capabilities":{"streaming":false}}`, `{"capabilities":{"streaming":false}}`},
		{"required empty string",
			`{"name":"A","description":""}`,
			`{"description":"","name":"A"}`, `{"name":"A"}`},
		{"optional empty string",
			`{"name":"A","iconUrl":""}`,
			`{"iconUrl":"","name":"A"}`, `{"name":"A"}`},
		{"implicit defaults dropped by both",
			`{"supportedInterfaces":[{"url":"https://a","protocolBinding":"JSONRPC","protocolVersion":"1.0","tenant":""}],"capabilities":{"extensions":[{"uri":"urn:x","required":false,"description":""}]}}`,
			`{"capabilities":{"extensions":[{"uri":"urn:x"}]},"supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":"https://a"}]}`,
			`{"capabilities":{"extensions":[{"uri":"urn:x"}]},"supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":"https://a"}]}`},
		{"empty oneof message",
			`{"name":"A","securitySchemes":{"m":{"mtlsSecurityScheme":{}}}}`,
			`{"name":"A","securitySchemes":{"m":{"mtlsSecurityScheme":{}}}}`, `{"name":"A"}`},
		{"scope-less requirement",
			`{"name":"A","securityRequirements":[{"schemes":{"m":{}}}]}`,
			`{"name":"A","securityRequirements":[{"schemes":{"m":{}}}]}`, `{"name":"A"}`},
		{"empty list in requirement",
			`{"name":"A","securityRequirements":[{"schemes":{"m":{"list":[]}}}]}`,
			`{"name":"A","securityRequirements":[{"schemes":{"m":{}}}]}`, `{"name":"A"}`},
		{"empty values in params",
			`{"capabilities":{"extensions":[{"uri":"urn:x","params":{"a":"","b":null,"c":[],"d":{},"e":[1,"",{}],"f":0,"g":false}}]}}`,
			`{"capabilities":{"extensions":[{"params":{"a":"","b":null,"c":[],"d":{},"e":[1,"",{}],"f":0,"g":false},"uri":"urn:x"}]}}`,
			`{"capabilities":{"extensions":[{"params":{"e":[1],"f":0,"g":false},"uri":"urn:x"}]}}`},
		{"numbers in params",
			`{"capabilities":{"extensions":[{"uri":"urn:x","params":{"a":1,"b":1.0,"c":1e-6,"d":1E21,"e":-0,"f":100e-2}}]}}`,
			`{"capabilities":{"extensions":[{"params":{"a":1,"b":1,"c":0.000001,"d":1e+21,"e":0,"f":1},"uri":"urn:x"}]}}`,
			`{"capabilities":{"extensions":[{"params":{"a":1,"b":1,"c":0.000001,"d":1e+21,"e":0,"f":1},"uri":"urn:x"}]}}`},
		{"non-ASCII literal, U+2028 literal, escapes",
			"{\"name\":\"Caf\\u00e9 \u2028 🎉\",\"description\":\"tab\\there \\\"q\\\" \\u001f\"}",
			"{\"description\":\"tab\\there \\\"q\\\" \\u001f\",\"name\":\"Café \u2028 🎉\"}",
			"{\"description\":\"tab\\there \\\"q\\\" \\u001f\",\"name\":\"Café \u2028 🎉\"}"},
		{"keys sorted by UTF-16 code units",
			"{\"capabilities\":{\"extensions\":[{\"uri\":\"urn:x\",\"params\":{\"\uFB01\":1,\"😀\":2,\"a\":3}}]}}",
			"{\"capabilities\":{\"extensions\":[{\"params\":{\"a\":3,\"😀\":2,\"\uFB01\":1},\"uri\":\"urn:x\"}]}}",
			"{\"capabilities\":{\"extensions\":[{\"params\":{\"a\":3,\"😀\":2,\"\uFB01\":1},\"uri\":\"urn:x\"}]}}"},
		{"unknown keys: spec keeps, sdk drops",
			`{"name":"A","color":"blue","capabilities":{"stateTransitionHistory":true}}`,
			`{"capabilities":{"stateTransitionHistory":true},"color":"blue","name":"A"}`, `{"name":"A"}`},
		{"signatures excluded",
			`{"name":"A","signatures":[{"protected":"x","signature":"y"}]}`,
			`{"name":"A"}`, `{"name":"A"}`},
		{"empty strings in lists",
			`{"defaultInputModes":["text/plain",""]}`,
			`{"defaultInputModes":["text/plain",""]}`, `{"defaultInputModes":["text/plain"]}`},
		{"everything empty",
			`{"description":""}`,
			`{"description":""}`, `{}`},
		{"proto field names: sdk reads them as JSON names, spec keeps them as unknown keys",
			`{"name":"A","icon_url":"https://i","capabilities":{"push_notifications":true},"supportedInterfaces":[{"url":"https://a","protocol_binding":"GRPC","protocolVersion":"1.0"}]}`,
			`{"capabilities":{"push_notifications":true},"icon_url":"https://i","name":"A","supportedInterfaces":[{"protocolVersion":"1.0","protocol_binding":"GRPC","url":"https://a"}]}`,
			`{"capabilities":{"pushNotifications":true},"iconUrl":"https://i","name":"A","supportedInterfaces":[{"protocolBinding":"GRPC","protocolVersion":"1.0","url":"https://a"}]}`},
		{"JSON name wins over proto name",
			`{"name":"A","iconUrl":"https://good","icon_url":"https://evil"}`,
			`{"iconUrl":"https://good","icon_url":"https://evil","name":"A"}`,
			`{"iconUrl":"https://good","name":"A"}`},
		{"sdk keeps the first oneof member in declaration order",
			`{"securitySchemes":{"k":{"mtlsSecurityScheme":{"description":"m"},"http_auth_security_scheme":{"scheme":"bearer"}}}}`,
			`{"securitySchemes":{"k":{"http_auth_security_scheme":{"scheme":"bearer"},"mtlsSecurityScheme":{"description":"m"}}}}`,
			`{"securitySchemes":{"k":{"httpAuthSecurityScheme":{"scheme":"bearer"}}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := canon(t, tc.in, ProfileSpec); got != tc.spec {
				t.Errorf("spec:\n got %s\nwant %s", got, tc.spec)
			}
			if got := canon(t, tc.in, ProfileSDK); got != tc.sdk {
				t.Errorf("sdk:\n got %s\nwant %s", got, tc.sdk)
			}
		})
	}
}

func TestCanonicalIgnoresOrderAndWhitespace(t *testing.T) {
	a := `{"name":"A","skills":[{"id":"s","name":"S","description":"d","tags":["x","y"]}],"capabilities":{"streaming":true,"pushNotifications":false}}`
	b := "{ \"capabilities\" : { \"pushNotifications\":false ,\n\"streaming\":true},\n\t\"skills\":[{\"tags\":[\"x\",\"y\"],\"description\":\"d\",\"name\":\"S\",\"id\":\"s\"}],\"name\":\"A\" }"
	for _, p := range Profiles() {
		if x, y := canon(t, a, p), canon(t, b, p); x != y {
			t.Errorf("%s: reordering changed the canonical form:\n%s\n%s", p, x, y)
		}
	}
	// Array order is meaning, not formatting.
	c := `{"name":"A","skills":[{"id":"s","name":"S","description":"d","tags":["y","x"]}],"capabilities":{"streaming":true,"pushNotifications":false}}`
	if canon(t, a, ProfileSpec) == canon(t, c, ProfileSpec) {
		t.Error("reordering an array must change the canonical form")
	}
}

func TestCanonicalTypeErrors(t *testing.T) {
	tests := []struct{ in, path string }{
		{`{"name":1}`, "name"},
		{`{"capabilities":{"streaming":"true"}}`, "capabilities.streaming"},
		{`{"skills":[{"tags":[1]}]}`, "skills[0].tags[0]"},
		{`{"securitySchemes":{"k":[]}}`, "securitySchemes.k"},
		{`{"iconUrl":null}`, "iconUrl"},
	}
	for _, tc := range tests {
		v, err := Parse([]byte(tc.in), strictjson.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range Profiles() {
			_, err := Canonical(v, p)
			var e *strictjson.Error
			if !errors.As(err, &e) || e.Path != tc.path || e.Rule != RuleType {
				t.Errorf("Canonical(%s, %s) = %v, want type error at %s", tc.in, p, err, tc.path)
			}
		}
	}
}

func TestCanonicalSpecSample(t *testing.T) {
	data := mustRead(t, "../testdata/cards/spec-sample.json")
	l, err := Load(data, Options{StripUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := Canonical(l.Value, ProfileSpec)
	if err != nil {
		t.Fatal(err)
	}
	sdk, err := Canonical(l.Value, ProfileSDK)
	if err != nil {
		t.Fatal(err)
	}
	if string(spec) != string(sdk) {
		t.Fatalf("the spec sample has no empty values; the profiles must agree:\n%s\n%s", spec, sdk)
	}
	f, err := CanonicalForms(l.Value)
	if err != nil || !f.Same() || string(f.Spec) != string(spec) {
		t.Fatalf("CanonicalForms = %+v, %v", f, err)
	}
}

func TestDivergences(t *testing.T) {
	v, err := Parse(withMembers(t,
		"securitySchemes", `{"m":{"mtlsSecurityScheme":{}}}`,
		"securityRequirements", `[{"schemes":{"m":{}}}]`,
		"iconUrl", `""`,
	), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := CanonicalForms(v)
	if err != nil {
		t.Fatal(err)
	}
	got := f.Divergences
	want := map[string]bool{"securitySchemes.m.mtlsSecurityScheme": true, "securityRequirements[0].schemes.m": true, "iconUrl": true}
	if len(got) != len(want) {
		t.Fatalf("Divergences = %v, want %v", got, want)
	}
	for _, p := range got {
		if !want[p] {
			t.Fatalf("Divergences = %v, want %v", got, want)
		}
	}
}

// TestJSResolverForm: Forms.JSResolver, cut out of the sdk bytes, is the
// sdk canonicalization of the card without securitySchemes, wherever that
// member sorts and whatever it holds.
func TestJSResolverForm(t *testing.T) {
	const rest = `"name":"A","description":"d \"securitySchemes\":{","version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}],"supportedInterfaces":[{"url":"https://a.example","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]`
	tests := []struct{ name, card string }{
		{"schemes among other members", `{` + rest + `,"securitySchemes":{"b":{"httpAuthSecurityScheme":{"scheme":"bearer","description":"x\\\"}"}}}}`},
		{"schemes the last member", `{` + rest + `,"securitySchemes":{"b":{"mtlsSecurityScheme":{"description":"z"}}},"signatures":[]}`},
		{"schemes the only member", `{"securitySchemes":{"b":{"httpAuthSecurityScheme":{"scheme":"bearer"}}}}`},
		{"schemes first", `{"capabilities":{},"securitySchemes":{"a":{"httpAuthSecurityScheme":{"scheme":"bearer"}}}}`},
		{"empty schemes, dropped by the sdk profile", `{` + rest + `,"securitySchemes":{"m":{"mtlsSecurityScheme":{}}}}`},
		{"no schemes", `{` + rest + `}`},
		{"spec sample", string(mustRead(t, "../testdata/cards/spec-sample-stripped.json"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Parse([]byte(tc.card), strictjson.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			f, err := CanonicalForms(v)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Canonical(v.Without("securitySchemes"), ProfileSDK)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(f.JSResolver, want) {
				t.Fatalf("JSResolver\n%s\nwant\n%s", f.JSResolver, want)
			}
		})
	}
}

// mustRead reads a test file, failing tb when it cannot.
func mustRead(tb testing.TB, name string) []byte {
	tb.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// TestWithoutTopMember cuts a top-level member out of canonical text, past
// strings holding escaped quotes and backslashes and nested members of the
// same name.
func TestWithoutTopMember(t *testing.T) {
	const name = `"securitySchemes":`
	for _, tt := range []struct{ in, want string }{
		{`{"a":"x\"securitySchemes\":1","securitySchemes":{"k":[1]},"z":2}`, `{"a":"x\"securitySchemes\":1","z":2}`},
		{`{"a":"x\\","securitySchemes":{},"z":"\\\""}`, `{"a":"x\\","z":"\\\""}`},
		{`{"a":{"securitySchemes":{}},"b":1}`, `{"a":{"securitySchemes":{}},"b":1}`},
		{`{"a":1,"securitySchemes":{"s":"}"}}`, `{"a":1}`},
		{`{"securitySchemes":{}}`, `{}`},
		{`{"a":"\\\\"}`, `{"a":"\\\\"}`},
	} {
		if got := string(withoutTopMember([]byte(tt.in), name)); got != tt.want {
			t.Errorf("withoutTopMember(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
