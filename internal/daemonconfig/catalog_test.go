package daemonconfig

import (
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
)

// TestCatalogConfig: each field's refusal names the field, its line and
// the rule; a valid section gets its defaults.
func TestCatalogConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"off", "", nil},
		{"domain only", "catalog:\n  domain: example.com\n", nil},
		{"every field", "catalog:\n  domain: example.com\n  namespace: finance:agents\n  display_name: Example Corp\n  publisher_name: Example Corp Platform\n  base_url: https://agents.example.com/cardsign/\n  inline: true\n", nil},
		{"fields without a domain", "catalog:\n  namespace: a2a\n", []string{"c.yaml:1:1: catalog.domain", "is not set"}},
		{"uppercase domain", "catalog:\n  domain: Example.com\n", []string{"c.yaml:2:3: catalog.domain", `"Example.com"`, "lowercase"}},
		{"domain with a port", "catalog:\n  domain: example.com:8443\n", []string{"catalog.domain", "port"}},
		{"domain with a scheme", "catalog:\n  domain: https://example.com\n", []string{"catalog.domain", "port or percent-encoding"}},
		{"single-label domain", "catalog:\n  domain: localhost\n", []string{"catalog.domain", "single label"}},
		{"IP address", "catalog:\n  domain: 192.0.2.1\n", []string{"catalog.domain", "IP address"}},
		{"trailing dot", "catalog:\n  domain: example.com.\n", []string{"catalog.domain", "dot"}},
		{"namespace uppercase", "catalog:\n  domain: example.com\n  namespace: A2A\n", []string{"c.yaml:3:3: catalog.namespace", `"A2A"`, "lowercase"}},
		{"namespace empty segment", "catalog:\n  domain: example.com\n  namespace: \"a::b\"\n", []string{"catalog.namespace", "empty segment"}},
		{"namespace trailing colon", "catalog:\n  domain: example.com\n  namespace: \"a2a:\"\n", []string{"catalog.namespace", "empty segment"}},
		{"namespace hyphen", "catalog:\n  domain: example.com\n  namespace: -a2a\n", []string{"catalog.namespace", "hyphen"}},
		{"namespace too long", "catalog:\n  domain: example.com\n  namespace: " + strings.Repeat("a", 65) + "\n", []string{"catalog.namespace", "1–64 bytes"}},
		{"namespace with a slash", "catalog:\n  domain: example.com\n  namespace: a/b\n", []string{"catalog.namespace", `"/"`}},
		{"display name with a newline", "catalog:\n  domain: example.com\n  display_name: \"Example\\nCorp\"\n", []string{"c.yaml:3:3: catalog.display_name", "control", `"Example\nCorp"`}},
		{"display name with a bidi override", "catalog:\n  domain: example.com\n  display_name: \"Exa\\u202emple\"\n", []string{"catalog.display_name", "U+202E"}},
		{"display name too long", "catalog:\n  domain: example.com\n  publisher_name: " + strings.Repeat("é", 201) + "\n", []string{"catalog.publisher_name", "200 characters"}},
		{"display name padded", "catalog:\n  domain: example.com\n  publisher_name: \" Example \"\n", []string{"catalog.publisher_name", "white space"}},
		{"display name not UTF-8", "catalog:\n  domain: example.com\n  display_name: !!binary /w==\n", []string{"catalog.display_name"}},
		{"base url http", "catalog:\n  domain: example.com\n  base_url: http://example.com\n", []string{"c.yaml:3:3: catalog.base_url", "https"}},
		{"base url with a query", "catalog:\n  domain: example.com\n  base_url: https://example.com/?a=1\n", []string{"catalog.base_url", "query"}},
		{"base url with an empty query", "catalog:\n  domain: example.com\n  base_url: https://example.com/?\n", []string{"catalog.base_url", "query"}},
		{"base url with a fragment", "catalog:\n  domain: example.com\n  base_url: \"https://example.com/#x\"\n", []string{"catalog.base_url", "fragment"}},
		{"base url with user information", "catalog:\n  domain: example.com\n  base_url: https://me:pw@example.com\n", []string{"catalog.base_url", "user information"}},
		{"base url without a host", "catalog:\n  domain: example.com\n  base_url: https:///agents\n", []string{"catalog.base_url", "no host"}},
		{"every problem at once", "catalog:\n  domain: EXAMPLE\n  namespace: \"\"\n  display_name: \"\\t\"\n  base_url: ftp://x\n",
			[]string{"catalog.domain", "catalog.display_name", "catalog.base_url"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := loadValidated(t, tc.yaml)
			wantMentions(t, cfg, err, tc.want)
		})
	}
}

// TestCatalogDefaults: a domain alone gives the documented defaults; set
// fields are kept (a base URL without its trailing slash).
func TestCatalogDefaults(t *testing.T) {
	cfg, _, err := loadValidated(t, "catalog:\n  domain: example.com\n")
	if err != nil {
		t.Fatal(err)
	}
	want := CatalogConfig{Domain: "example.com", Namespace: "a2a", DisplayName: "example.com", PublisherName: "example.com", BaseURL: "https://example.com"}
	if cfg.Catalog != want {
		t.Fatalf("defaults: %+v, want %+v", cfg.Catalog, want)
	}
	cfg, _, err = loadValidated(t, "catalog:\n  domain: example.com\n  display_name: Example Corp\n  base_url: https://agents.example.com/cs/\n  inline: true\n")
	if err != nil {
		t.Fatal(err)
	}
	want = CatalogConfig{Domain: "example.com", Namespace: "a2a", DisplayName: "Example Corp", PublisherName: "Example Corp", BaseURL: "https://agents.example.com/cs", Inline: true}
	if cfg.Catalog != want {
		t.Fatalf("set fields: %+v, want %+v", cfg.Catalog, want)
	}
	cfg, _, err = loadValidated(t, "")
	if err != nil || cfg.Catalog.Enabled() || cfg.Catalog != (CatalogConfig{}) {
		t.Fatalf("no section: %+v %v", cfg.Catalog, err)
	}
}

// TestCheckCatalogKeys: a catalog needs a key registry/catalog.SignerView
// would sign it with (an active ES256 key, or a pending one scheduled to
// activate beside an active key, with a kid that is a DID URL fragment), or,
// on a fresh store, keys.default_alg ES256; the refusal says which key to
// add.
func TestCheckCatalogKeys(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	key := func(kid string, alg jose.Alg, change func(*jwks.KeyRecord)) jwks.KeyRecord {
		r := jwks.KeyRecord{KID: kid, Alg: alg, CreatedAt: now.Add(-48 * time.Hour), PublishAt: now.Add(-48 * time.Hour)}
		if change != nil {
			change(&r)
		}
		return r
	}
	active := func(r *jwks.KeyRecord) { r.ActivateAt = at(-47 * time.Hour) }
	revoked := func(r *jwks.KeyRecord) { r.ActivateAt = at(-47 * time.Hour); r.RevokedAt = at(-time.Hour) }
	retired := func(r *jwks.KeyRecord) { r.ActivateAt = at(-47 * time.Hour); r.RetireAt = at(-time.Hour) }
	scheduled := func(r *jwks.KeyRecord) { r.PublishAt = now.Add(time.Hour); r.ActivateAt = at(2 * time.Hour) }
	rotating := func(r *jwks.KeyRecord) { r.ActivateAt = at(time.Hour) }
	for _, tc := range []struct {
		name, yaml string
		recs       []jwks.KeyRecord
		want       []string
	}{
		{"catalog off, RSA keys", "keys:\n  default_alg: RS256\n", []jwks.KeyRecord{key("r", jose.RS256, active)}, nil},
		{"fresh store, ES256 default", "catalog:\n  domain: example.com\n", nil, nil},
		{"fresh store, RSA default", "keys:\n  default_alg: RS256\ncatalog:\n  domain: example.com\n", nil,
			[]string{"c.yaml:2:3: keys.default_alg", "RS256", "keys.default_alg: ES256"}},
		{"active ES256", "keys:\n  default_alg: RS256\ncatalog:\n  domain: example.com\n", []jwks.KeyRecord{key("e", jose.ES256, active)}, nil},
		{"pending ES256 rotating in beside an active RSA key", "catalog:\n  domain: example.com\n", []jwks.KeyRecord{key("r", jose.RS256, active), key("e", jose.ES256, rotating)}, nil},
		// As SignerView: a pending key not scheduled to activate, a
		// scheduled (not yet published) key and a kid that is no DID URL
		// fragment sign nothing.
		{"pending ES256 not scheduled to activate", "catalog:\n  domain: example.com\n", []jwks.KeyRecord{key("r", jose.RS256, active), key("e", jose.ES256, nil)},
			[]string{"catalog.domain", `"e" (ES256, pending)`, "keys activate KID"}},
		{"scheduled ES256", "catalog:\n  domain: example.com\n", []jwks.KeyRecord{key("r", jose.RS256, active), key("e", jose.ES256, scheduled)},
			[]string{"catalog.domain", `"e" (ES256, scheduled)`}},
		{"active ES256 whose kid is no fragment", "catalog:\n  domain: example.com\n", []jwks.KeyRecord{key("urn:k", jose.ES256, active)},
			[]string{"catalog.domain", `"urn:k" (ES256, active)`, "DID URL fragment"}},
		{"pending ES256 with no active key", "catalog:\n  domain: example.com\n", []jwks.KeyRecord{key("e", jose.ES256, rotating)},
			[]string{"catalog.domain", `"e" (ES256, pending)`}},
		{"only RSA and EdDSA", "catalog:\n  domain: example.com\n", []jwks.KeyRecord{key("r", jose.RS256, active), key("d", jose.EdDSA, nil)},
			[]string{"c.yaml:2:3: catalog.domain", `"r" (RS256, active)`, `"d" (EdDSA, pending)`, "keys create --alg ES256"}},
		{"ES256 revoked", "keys:\n  default_alg: PS256\ncatalog:\n  domain: example.com\n", []jwks.KeyRecord{key("e", jose.ES256, revoked), key("p", jose.PS256, active)},
			[]string{"catalog.domain", `"p" (PS256, active)`, "keys.default_alg: ES256"}},
		{"ES256 retired", "catalog:\n  domain: example.com\n", []jwks.KeyRecord{key("e", jose.ES256, retired)}, []string{"catalog.domain", "keys not revoked, expired or retired: none"}},
		{"ES384 is not ES256", "catalog:\n  domain: example.com\n", []jwks.KeyRecord{key("e", jose.ES384, active)}, []string{"catalog.domain", `"e" (ES384, active)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := loadValidated(t, tc.yaml)
			if err != nil {
				t.Fatal(err)
			}
			wantMentions(t, cfg, cfg.CheckCatalogKeys(tc.recs), tc.want)
		})
	}
}

// FuzzCheckNamespace: whatever it accepts is a namespace urn:air reads
// back: the identifier's publisher is the domain, and the namespace holds
// only the documented characters.
func FuzzCheckNamespace(f *testing.F) {
	for _, s := range []string{"a2a", "finance:agents", "a::b", ":a", "a:", "-a", "A", "a/b", "é", strings.Repeat("a", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ns string) {
		if CheckNamespace(ns) != nil {
			return
		}
		if len(ns) == 0 || len(ns) > 64 || strings.Contains(ns, "::") || strings.HasPrefix(ns, ":") || strings.HasSuffix(ns, ":") {
			t.Fatalf("accepted %q", ns)
		}
		for _, c := range ns {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == ':') {
				t.Fatalf("accepted %q with %q", ns, c)
			}
		}
		if p, ok := aicatalog.PublisherOf(aicatalog.Identifier("example.com", ns, "agent")); !ok || p != "example.com" {
			t.Fatalf("urn:air with namespace %q reads back publisher %q %v", ns, p, ok)
		}
	})
}
