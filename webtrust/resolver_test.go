package webtrust

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/strictjson"
)

func TestResolveDID(t *testing.T) {
	p := newPKI(t)
	k := newTestKey(t, "k1")
	doc, err := aicatalog.DIDDocument("catalog.example", []aicatalog.VerificationKey{{Fragment: "k1", Public: k.key.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{
		"catalog.example": "application/did+json",
		"ld.example":      "application/did+ld+json; charset=utf-8",
		"json.example":    "application/json",
		"html.example":    "text/html",
	}
	s := p.newSite(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != aicatalog.DIDPath {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", types[r.Host])
		w.Write(doc)
	}), "catalog.example", "ld.example", "json.example", "html.example")
	c := p.newTestClient(t, Options{}, s)
	for _, did := range []string{"did:web:catalog.example", "did:web:ld.example", "did:web:json.example"} {
		if b, err := c.ResolveDID(t.Context(), did); err != nil || string(b) != string(doc) {
			t.Errorf("%s: %v", did, err)
		}
	}
	for did, want := range map[string]string{
		"did:web:html.example":                `served as "text/html"`,
		"did:web:catalog.example:users:x":     "not a root did:web DID",
		"did:web:catalog.example%3A8443":      "port",
		"did:web:127.0.0.1":                   "IP address",
		"did:key:z6Mkf":                       "does not start with",
		"did:web:unknown.example":             "unknown.example",
		"did:web:catalog.example.":            "dot",
		"did:web:" + strings.Repeat("a", 300): "253",
	} {
		if _, err := c.ResolveDID(t.Context(), did); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", did, err, want)
		}
	}
}

func TestDIDKeys(t *testing.T) {
	k := newTestKey(t, "k1")
	j := k.jwk(t)
	jwk := `{"kty":"EC","crv":"P-256","x":"` + j.X + `","y":"` + j.Y + `"}`
	method := func(id, controller, key string) string {
		return `{"id":"` + id + `","type":"JsonWebKey2020","controller":"` + controller + `","publicKeyJwk":` + key + `}`
	}
	const did = "did:web:a.example"
	good := method(did+"#k1", did, jwk)
	for _, tc := range []struct{ name, doc, want string }{
		{"by reference", `{"id":"` + did + `","verificationMethod":[` + good + `],"assertionMethod":["` + did + `#k1"]}`, ""},
		{"relative reference", `{"id":"` + did + `","verificationMethod":[` + method("#k1", did, jwk) + `],"assertionMethod":["#k1"]}`, ""},
		{"embedded", `{"id":"` + did + `","assertionMethod":[` + good + `]}`, ""},
		{"id mismatch", `{"id":"did:web:b.example","assertionMethod":[` + good + `]}`, "is not did:web:a.example"},
		{"no assertionMethod", `{"id":"` + did + `","verificationMethod":[` + good + `],"authentication":["#k1"]}`, "authorizes no P-256 key"},
		{"dangling reference", `{"id":"` + did + `","assertionMethod":["#k2"]}`, "authorizes no P-256 key"},
		{"other controller", `{"id":"` + did + `","assertionMethod":[` + method(did+"#k1", "did:web:b.example", jwk) + `]}`, "authorizes no P-256 key"},
		{"key under another DID", `{"id":"` + did + `","assertionMethod":[` + method("did:web:b.example#k1", did, jwk) + `]}`, "authorizes no P-256 key"},
		{"private member", `{"id":"` + did + `","assertionMethod":[` + method(did+"#k1", did, strings.Replace(jwk, `"kty"`, `"d":"AAAA","kty"`, 1)) + `]}`, "authorizes no P-256 key"},
		{"not P-256", `{"id":"` + did + `","assertionMethod":[` + method(did+"#k1", did, `{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`) + `]}`, "authorizes no P-256 key"},
		{"off-curve point", `{"id":"` + did + `","assertionMethod":[` + method(did+"#k1", did, `{"kty":"EC","crv":"P-256","x":"`+j.X+`","y":"`+j.X+`"}`) + `]}`, "authorizes no P-256 key"},
		{"bad key beside a good one", `{"id":"` + did + `","verificationMethod":[` + good + `],"assertionMethod":["#k1",` + method(did+"#k2", did, strings.Replace(jwk, `"kty"`, `"d":"AAAA","kty"`, 1)) + `]}`, ""},
		{"duplicate member", `{"id":"` + did + `","id":"` + did + `","assertionMethod":[]}`, "duplicate"},
		{"not an object", `[]`, "DID document is a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := didKeys(did, []byte(tc.doc), strictjson.Limits{})
			if tc.want == "" {
				if err != nil || len(set.Keys) != 1 || set.Keys[0].Kid != "k1" || set.Keys[0].X != j.X {
					t.Fatalf("%+v %v", set, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func FuzzDIDKeys(f *testing.F) {
	f.Add([]byte(`{"id":"did:web:a.example","verificationMethod":[{"id":"#k1","type":"JsonWebKey2020","controller":"did:web:a.example","publicKeyJwk":{"kty":"EC","crv":"P-256","x":"q8kKSY-aRUtNKnKFqhnsVt2i4DtIKc5pNdQrPhnBW00","y":"15F0eddIJShYEnudvW3vOb7SDowzRHwAzQsVVgnXjnM"}}],"assertionMethod":["#k1"]}`))
	f.Add([]byte(`{"id":"did:web:a.example","assertionMethod":[{"id":"did:web:a.example#k","controller":"did:web:a.example","publicKeyJwk":{"kty":"EC","crv":"P-256","x":"","y":"","d":""}}]}`))
	f.Add([]byte(`{"id":"did:web:a.example","assertionMethod":["#x",1,null,{}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := didKeys("did:web:a.example", data, strictjson.Limits{})
		if err != nil {
			return
		}
		for _, k := range set.Keys {
			if k.Kty != "EC" || k.Crv != "P-256" || k.Kid == "" {
				t.Fatalf("accepted %+v", k)
			}
			if _, err := k.PublicKey(); err != nil {
				t.Fatalf("accepted an invalid key %+v: %v", k, err)
			}
		}
	})
}

func FuzzParseResolve(f *testing.F) {
	for _, s := range []string{"catalog.example:443:127.0.0.1:40123", "a:1:[::1]:2", "::::", "a:443:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseResolve(s)
		if err != nil {
			return
		}
		if e.Host == "" || checkPort(e.Port) != nil {
			t.Fatalf("accepted %q as %+v", s, e)
		}
		if _, err := netip.ParseAddrPort(e.Addr); err != nil {
			t.Fatalf("accepted %q with address %q: %v", s, e.Addr, err)
		}
	})
}
