package card

import (
	"errors"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/strictjson"
)

func TestUpgradeV03(t *testing.T) {
	data := mustRead(t, "../testdata/cards/v03.json")
	l, err := Load(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Shape != V03 {
		t.Fatalf("shape %s, want %s", l.Shape, V03)
	}
	got := string(l.Value.Compact())
	for _, want := range []string{
		`"supportedInterfaces":[{"url":"https://legacy.example.com/a2a","protocolBinding":"JSONRPC","protocolVersion":"0.3"},{"url":"https://legacy.example.com/a2a","protocolBinding":"JSONRPC","protocolVersion":"0.3"},{"url":"legacy.example.com:443","protocolBinding":"GRPC","protocolVersion":"0.3"}]`,
		`"capabilities":{"streaming":true,"extendedAgentCard":true}`,
		`"key":{"apiKeySecurityScheme":{"location":"header","name":"X-API-Key","description":"API key"}}`,
		`"bearer":{"httpAuthSecurityScheme":{"scheme":"bearer","bearerFormat":"JWT"}}`,
		`"oauth":{"oauth2SecurityScheme":{"flows":{"authorizationCode":{"authorizationUrl":"https://auth.example.com/authorize"`,
		`"oidc":{"openIdConnectSecurityScheme":{"openIdConnectUrl":"https://auth.example.com/.well-known/openid-configuration"}}`,
		`"mtls":{"mtlsSecurityScheme":{"description":"client certificates"}}`,
		`"securityRequirements":[{"schemes":{"oauth":{"list":["read"]}}},{"schemes":{"key":{"list":[]}}}]`,
		`"skills":[{"id":"s","name":"S","description":"d","tags":["t"],"securityRequirements":[{"schemes":{"bearer":{"list":[]}}}]}]`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("mapped card lacks %s\nmapped: %s", want, got)
		}
	}
	for _, k := range v03Only {
		if l.Value.Has(k) {
			t.Errorf("mapped card still has the v0.3 member %s", k)
		}
	}
	for _, gone := range []string{`stateTransitionHistory`, `"type":`, `"in":`, `clientCredentials`, `"0.3.0"`} {
		if strings.Contains(got, gone) {
			t.Errorf("mapped card still has %s", gone)
		}
	}
	if fs := Lint(l.Value); HasErrors(fs) {
		t.Fatalf("mapped card fails lint: %v", fs)
	}
	var notes []string
	for _, n := range l.Notes {
		notes = append(notes, n.String())
	}
	joined := strings.Join(notes, "\n")
	for _, want := range []string{"securitySchemes.oauth.flows.clientCredentials: dropped", "capabilities.stateTransitionHistory: removed", "protocolVersion: removed"} {
		if !strings.Contains(joined, want) {
			t.Errorf("notes lack %q:\n%s", want, joined)
		}
	}
}

func TestUpgradeLeavesV10Alone(t *testing.T) {
	in := withMembers(t)
	v, err := Parse(in, strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	out, notes, err := Upgrade(v)
	if err != nil || len(notes) != 0 || string(out.Compact()) != string(in) {
		t.Fatalf("Upgrade changed a v1.0 card: %s %v %v", out.Compact(), notes, err)
	}
	// A card with both url and supportedInterfaces is v1.0 with a stray key.
	v, _ = Parse(withMembers(t, "url", `"https://x.example"`), strictjson.Limits{})
	if IsV03(v) {
		t.Fatal("a card with supportedInterfaces is v1.0")
	}
}

func TestUpgradeMinimal(t *testing.T) {
	v, err := Parse([]byte(`{"name":"A","url":"https://a.example","supportsAuthenticatedExtendedCard":false}`), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := Upgrade(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"A","supportedInterfaces":[{"url":"https://a.example","protocolBinding":"JSONRPC","protocolVersion":"0.3"}],"capabilities":{"extendedAgentCard":false}}`
	if got := string(out.Compact()); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestUpgradeErrors(t *testing.T) {
	tests := []struct{ in, path, rule string }{
		{`{"url":5}`, "url", RuleType},
		{`{"url":"https://a","preferredTransport":1}`, "preferredTransport", RuleType},
		{`{"url":"https://a","additionalInterfaces":[{"url":"https://b"}]}`, "additionalInterfaces[0].transport", RuleType},
		{`{"url":"https://a","security":{"k":[]}}`, "security", RuleType},
		{`{"url":"https://a","security":[{"k":"read"}]}`, "security[0].k", RuleType},
		{`{"url":"https://a","securitySchemes":{"k":{"type":"kerberos"}}}`, "securitySchemes.k.type", RuleV03},
		{`{"url":"https://a","securitySchemes":{"o":{"type":"oauth2","flows":{}}}}`, "securitySchemes.o.flows", RuleV03},
		{`{"url":"https://a","supportsAuthenticatedExtendedCard":"yes"}`, "supportsAuthenticatedExtendedCard", RuleType},
		{`{"url":"https://a","capabilities":[]}`, "capabilities", RuleType},
		{`{"url":"https://a","security":[],"securityRequirements":[]}`, "security", RuleV03},
		{`{"url":"https://a","skills":[{"security":[],"securityRequirements":[]}]}`, "skills[0].security", RuleV03},
		{`{"url":"https://a","supportsAuthenticatedExtendedCard":true,"capabilities":{"extendedAgentCard":false}}`, "supportsAuthenticatedExtendedCard", RuleV03},
		{`{"url":"https://a","securitySchemes":{"k":{"type":"apiKey","in":"header","location":"query","name":"k"}}}`, "securitySchemes.k.in", RuleV03},
	}
	for _, tc := range tests {
		_, err := Load([]byte(tc.in), Options{})
		var e *strictjson.Error
		if !errors.As(err, &e) || e.Path != tc.path || e.Rule != tc.rule {
			t.Errorf("Load(%s) = %v, want %s at %s", tc.in, err, tc.rule, tc.path)
		}
	}
}

// TestReadings: a v0.3 card is read as cardsign maps it and, where they
// differ, as a2a-python (its own protocolVersion on every interface) and
// @a2a-js/sdk (on the first only) do; a v1.0 card has one reading.
func TestReadings(t *testing.T) {
	const head = `{"name":"A","description":"d","version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]`
	two := `,"url":"https://a.example.com/a2a","additionalInterfaces":[{"url":"https://a.example.com/rest","transport":"HTTP+JSON"}]`
	tests := []struct {
		name string
		card string
		want map[Mapping][]string // reading → protocolVersion per interface
	}{
		{"v1.0 card", head + `,"supportedInterfaces":[{"url":"https://a.example.com","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`,
			map[Mapping][]string{"": {"1.0"}}},
		{"v0.3 card of 0.3.0, two interfaces", head + two + `,"protocolVersion":"0.3.0"}`,
			map[Mapping][]string{MappingCardsign: {"0.3", "0.3"}, MappingPython: {"0.3.0", "0.3.0"}, MappingJS: {"0.3.0", "0.3"}}},
		{"v0.3 card of 0.3.0, one interface", head + `,"url":"https://a.example.com/a2a","protocolVersion":"0.3.0"}`,
			map[Mapping][]string{MappingCardsign: {"0.3"}, MappingPython: {"0.3.0"}}},
		{"v0.3 card of 0.3", head + two + `,"protocolVersion":"0.3"}`, map[Mapping][]string{MappingCardsign: {"0.3", "0.3"}}},
		{"v0.3 card without protocolVersion", head + two + `}`, map[Mapping][]string{MappingCardsign: {"0.3", "0.3"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Load([]byte(tc.card), Options{})
			if err != nil {
				t.Fatal(err)
			}
			rs := l.Readings()
			if len(rs) != len(tc.want) {
				t.Fatalf("%d readings, want %d", len(rs), len(tc.want))
			}
			for _, r := range rs {
				ifaces, _ := r.Value.Get("supportedInterfaces")
				var got []string
				for _, i := range ifaces.Arr {
					pv, _ := i.Get("protocolVersion")
					got = append(got, pv.Str)
				}
				if want, ok := tc.want[r.Mapping]; !ok || strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("reading %q: protocolVersions %v, want %v", r.Mapping, got, want)
				}
			}
			// A mapping that reads the card as an earlier one does falls back to it.
			if js := l.Reading(MappingJS); len(tc.want) == 2 && js.Mapping != MappingPython {
				t.Errorf("@a2a-js/sdk's reading of a one-interface card is %q, want a2a-python's", js.Mapping)
			}
		})
	}
}
