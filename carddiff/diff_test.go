package carddiff

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/strictjson"
)

func parse(t testing.TB, s string) strictjson.Value {
	t.Helper()
	if s == "" {
		return strictjson.Value{}
	}
	v, err := strictjson.Parse([]byte(s), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const base = `{"name":"Orders","version":"1.0","capabilities":{"extendedAgentCard":false},
"supportedInterfaces":[{"url":"https://orders.example.com/a2a","protocolBinding":"JSONRPC"}],
"securitySchemes":{"corp":{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"https://idp/t","scopes":{"read":"r","write":"w"}}}}},
 "key":{"apiKeySecurityScheme":{"location":"header","name":"X-Key"}}},
"securityRequirements":[{"schemes":{"corp":{"list":["read"]}}}],
"skills":[{"id":"find","name":"Find","description":"d","tags":["t"]},{"id":"cancel","name":"Cancel","description":"d","tags":["t"]}]}`

// edit returns base with old replaced by new (once, and it must occur).
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(base, old) {
		t.Fatalf("base has no %q", old)
	}
	return strings.Replace(base, old, new, 1)
}

// TestCompute: each fact, from the edit that makes it.
func TestCompute(t *testing.T) {
	tests := []struct {
		name string
		cur  string
		want func(d *Diff)
	}{
		{"identical, members reordered", `{"version":"1.0","name":"Orders","capabilities":{"extendedAgentCard":false},
"supportedInterfaces":[{"protocolBinding":"JSONRPC","url":"https://orders.example.com/a2a"}],
"securitySchemes":{"key":{"apiKeySecurityScheme":{"name":"X-Key","location":"header"}},"corp":{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"https://idp/t","scopes":{"write":"w","read":"r"}}}}}},
"securityRequirements":[{"schemes":{"corp":{"list":["read"]}}}],
"skills":[{"id":"find","name":"Find","description":"d","tags":["t"]},{"id":"cancel","name":"Cancel","description":"d","tags":["t"]}]}`, func(d *Diff) {}},
		{"host added, another spelling of an old one not", edit(t, `"protocolBinding":"JSONRPC"}]`, `"protocolBinding":"JSONRPC"},{"url":"https://EU.Orders.example.com.:8443/a2a","protocolBinding":"HTTP+JSON"},{"url":"https://ORDERS.example.com/v2","protocolBinding":"HTTP+JSON"}]`), func(d *Diff) {
			d.Changed = []string{"supportedInterfaces"}
			d.HostsAdded = []string{"eu.orders.example.com"}
			d.InterfacesAdded = []string{"HTTP+JSON https://EU.Orders.example.com.:8443/a2a", "HTTP+JSON https://ORDERS.example.com/v2"}
			d.InterfacesChanged = true
		}},
		{"gRPC host:port replaces the host", edit(t, `{"url":"https://orders.example.com/a2a","protocolBinding":"JSONRPC"}`, `{"url":"grpc.orders.example.com:443","protocolBinding":"GRPC"}`), func(d *Diff) {
			d.Changed = []string{"supportedInterfaces"}
			d.HostsAdded, d.HostsRemoved = []string{"grpc.orders.example.com"}, []string{"orders.example.com"}
			d.InterfacesAdded, d.InterfacesRemoved = []string{"GRPC grpc.orders.example.com:443"}, []string{"JSONRPC https://orders.example.com/a2a"}
			d.InterfacesChanged = true
		}},
		{"another interface on a known host", edit(t, `"protocolBinding":"JSONRPC"}]`, `"protocolBinding":"JSONRPC"},{"url":"https://orders.example.com/b","protocolBinding":"JSONRPC"}]`), func(d *Diff) {
			d.Changed = []string{"supportedInterfaces"}
			d.InterfacesAdded = []string{"JSONRPC https://orders.example.com/b"}
			d.InterfacesChanged = true
		}},
		{"scheme removed, flow and scopes with it", edit(t, `"corp":{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"https://idp/t","scopes":{"read":"r","write":"w"}}}}},`, ""), func(d *Diff) {
			d.Changed = []string{"securitySchemes"}
			d.SecuritySchemesRemoved = []string{"corp"}
			d.OAuthFlowsRemoved = []string{"corp.clientCredentials"}
			d.ScopesRemoved = []string{"corp.clientCredentials.read", "corp.clientCredentials.write"}
		}},
		{"scheme changed: a flow added, a scope dropped", edit(t, `"clientCredentials":{"tokenUrl":"https://idp/t","scopes":{"read":"r","write":"w"}}`, `"clientCredentials":{"tokenUrl":"https://idp/t","scopes":{"read":"r"}},"deviceCode":{"deviceAuthorizationUrl":"https://idp/d","tokenUrl":"https://idp/t","scopes":{}}`), func(d *Diff) {
			d.Changed = []string{"securitySchemes"}
			d.SecuritySchemesChanged = []string{"corp"}
			d.OAuthFlowsAdded = []string{"corp.deviceCode"}
			d.ScopesRemoved = []string{"corp.clientCredentials.write"}
		}},
		{"scheme added, requirement changed", strings.Replace(edit(t, `"securityRequirements":[{"schemes":{"corp":{"list":["read"]}}}]`, `"securityRequirements":[{"schemes":{"mtls":{"list":[]}}}]`),
			`"key":{`, `"mtls":{"mtlsSecurityScheme":{}},"key":{`, 1), func(d *Diff) {
			d.Changed = []string{"securityRequirements", "securitySchemes"}
			d.SecuritySchemesAdded = []string{"mtls"}
			d.SecurityRequirementsChanged = true
		}},
		{"skills added, removed, changed", strings.Replace(edit(t, `{"id":"cancel","name":"Cancel","description":"d","tags":["t"]}`, `{"id":"refund","name":"Refund","description":"d","tags":["t"]}`),
			`"name":"Find"`, `"name":"Find orders"`, 1), func(d *Diff) {
			d.Changed = []string{"skills"}
			d.SkillsAdded, d.SkillsRemoved, d.SkillsChanged = []string{"refund"}, []string{"cancel"}, []string{"find"}
		}},
		{"version, name, extended card", strings.Replace(strings.Replace(edit(t, `"version":"1.0"`, `"version":"1.1"`), `"name":"Orders"`, `"name":"Orders v2"`, 1), `"extendedAgentCard":false`, `"extendedAgentCard":true`, 1), func(d *Diff) {
			d.Changed = []string{"capabilities", "name", "version"}
			d.VersionChanged, d.Version, d.NameChanged, d.ExtendedCardChanged = true, "1.1", true, true
		}},
		{"a member of the wrong type differs, never panics", `{"name":"Orders","version":"1.0","supportedInterfaces":"https://x","securitySchemes":[1],"skills":{"id":"find"}}`, func(d *Diff) {
			d.Changed = []string{"capabilities", "securityRequirements", "securitySchemes", "skills", "supportedInterfaces"}
			d.HostsRemoved = []string{"orders.example.com"}
			d.InterfacesRemoved = []string{"JSONRPC https://orders.example.com/a2a"}
			d.InterfacesChanged, d.SecurityRequirementsChanged, d.ExtendedCardChanged = true, true, true
			d.SecuritySchemesRemoved = []string{"corp", "key"}
			d.OAuthFlowsRemoved = []string{"corp.clientCredentials"}
			d.ScopesRemoved = []string{"corp.clientCredentials.read", "corp.clientCredentials.write"}
			d.SkillsRemoved = []string{"cancel", "find"}
		}},
		{"signatures are not compared", strings.Replace(base, `"name":"Orders",`, `"name":"Orders","signatures":[{"protected":"x","signature":"y"}],`, 1), func(d *Diff) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Compute(parse(t, tc.cur), parse(t, base))
			want := Diff{Version: got.Version, PreviousVersion: "1.0"}
			if want.Version == "" {
				want.Version = "1.0"
			}
			tc.want(&want)
			want.normalise()
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Fatalf("Compute:\n got %s\nwant %s", gj, wj)
			}
			if got.Empty() != (len(want.Changed) == 0) {
				t.Errorf("Empty() = %v", got.Empty())
			}
		})
	}
}

// TestUnsigned: the signatures member goes, the card it came from stays.
func TestUnsigned(t *testing.T) {
	signed := parse(t, `{"name":"a","signatures":[{"protected":"x","signature":"y"}],"version":"1"}`)
	u := Unsigned(signed)
	if _, ok := u.Get("signatures"); ok || string(u.Compact()) != `{"name":"a","version":"1"}` {
		t.Fatalf("Unsigned = %s", u.Compact())
	}
	if _, ok := signed.Get("signatures"); !ok {
		t.Fatal("Unsigned changed its argument")
	}
}

// TestFirstVersion: without a previous card everything counts as added.
func TestFirstVersion(t *testing.T) {
	d := Compute(parse(t, base), strictjson.Value{})
	if !d.First || d.Empty() || !reflect.DeepEqual(d.HostsAdded, []string{"orders.example.com"}) || !reflect.DeepEqual(d.SkillsAdded, []string{"cancel", "find"}) ||
		!reflect.DeepEqual(d.SecuritySchemesAdded, []string{"corp", "key"}) || d.PreviousVersion != "" || !d.VersionChanged {
		t.Fatalf("first version: %+v", d)
	}
	if lines := d.Lines(); lines[0] != "(first version of this agent: everything in the card is new)" {
		t.Fatalf("Lines: %q", lines)
	}
}

// TestLines: the readable form, hostile strings quoted.
func TestLines(t *testing.T) {
	cur := strings.Replace(strings.Replace(edit(t, `"version":"1.0"`, `"version":"1.1"`), `"protocolBinding":"JSONRPC"}]`, `"protocolBinding":"JSONRPC"},{"url":"https://eu.orders.example.com/a2a","protocolBinding":"JSONRPC"}]`, 1),
		`{"id":"cancel"`, `{"id":"can\u001b[2Jcel"`, 1)
	d := Compute(parse(t, cur), parse(t, base))
	want := []string{
		"+ host eu.orders.example.com",
		"+ interface \"JSONRPC https://eu.orders.example.com/a2a\"",
		"+ skill \"can\\x1b[2Jcel\"",
		"- skill cancel",
		"version 1.0 → 1.1",
		"changed members: skills, supportedInterfaces, version",
	}
	if got := d.Lines(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Lines:\n%q\nwant\n%q", got, want)
	}
}

// TestJSON: MarshalJSON and Parse round trip; Parse refuses what
// MarshalJSON never writes, naming the member.
func TestJSON(t *testing.T) {
	d := Compute(parse(t, edit(t, `"version":"1.0"`, `"version":"2"`)), parse(t, base))
	b, err := d.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip: %+v %v\n%s", back, err, b)
	}
	for _, tc := range []struct{ in, want string }{
		{`[]`, "an object"},
		{`{"hosts_added":"a"}`, "hosts_added is string, want a list"},
		{`{"hosts_added":[1]}`, "hosts_added[0] is number"},
		{`{"first":"yes"}`, "first is string, want true or false"},
		{`{"version":1}`, "version is number"},
		{`{"hostz":[]}`, `unknown member "hostz"`},
		{`{"first":true,"first":false}`, "duplicate"},
		{`{"changed":["` + strings.Repeat("a", MaxJSONBytes) + `"]}`, "limit"},
	} {
		if _, err := Parse([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%.40s): %v; want %q", tc.in, err, tc.want)
		}
	}
}

// FuzzCompute: any two JSON values: no panic, a card against itself is
// Empty, and the encoding round-trips.
func FuzzCompute(f *testing.F) {
	f.Add(base, base)
	f.Add(`{"skills":[{"id":1}],"securitySchemes":{"a":{"oauth2SecurityScheme":{"flows":[]}}}}`, `null`)
	f.Add(`{"supportedInterfaces":[{"url":"h:1","protocolBinding":"GRPC"},{"url":"%zz"}]}`, `{"supportedInterfaces":7}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		va, err := strictjson.Parse([]byte(a), strictjson.Limits{MaxBytes: 1 << 16})
		if err != nil {
			return
		}
		vb, err := strictjson.Parse([]byte(b), strictjson.Limits{MaxBytes: 1 << 16})
		if err != nil {
			return
		}
		d := Compute(va, vb)
		if self := Compute(va, va); va.Kind != strictjson.Null && !self.Empty() {
			t.Fatalf("a card against itself: %+v", self)
		}
		enc, _ := d.MarshalJSON()
		back, err := Parse(enc)
		if err != nil || !reflect.DeepEqual(back, d) {
			t.Fatalf("round trip: %v", err)
		}
		_ = d.Lines()
	})
}
