package aicatalog

import (
	"crypto/ecdsa"
	"errors"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// TestParseDIDDocumentRoundTrip: what DIDDocument serves, ParseDIDDocument
// reads back with the same keys.
func TestParseDIDDocumentRoundTrip(t *testing.T) {
	var keys []VerificationKey
	for _, frag := range []string{"k1", "k2"} {
		keys = append(keys, VerificationKey{Fragment: frag, Public: testsupport.Key(t, jose.ES256).Public()})
	}
	b, err := DIDDocument("example.com", keys)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ParseDIDDocument(b, strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if doc.ID != "did:web:example.com" {
		t.Errorf("id %q", doc.ID)
	}
	got, err := doc.AssertionKeys()
	if err != nil || len(got) != 2 {
		t.Fatalf("AssertionKeys: %v %+v", err, got)
	}
	for i, k := range got {
		if k.Fragment != keys[i].Fragment || k.KID != "did:web:example.com#"+keys[i].Fragment || !k.Public.Equal(keys[i].Public) {
			t.Errorf("key %d: %+v", i, k)
		}
		pub, err := doc.SelectKey(k.KID, doc.ID)
		if err != nil || !pub.Equal(k.Public) {
			t.Errorf("SelectKey(%s): %v", k.KID, err)
		}
	}
}

func TestParseDIDDocumentRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		lim       strictjson.Limits
		want      string
	}{
		{"duplicate", `{"id":"did:web:a.example","id":"did:web:b.example"}`, strictjson.Limits{}, "duplicate"},
		{"no id", `{"assertionMethod":[]}`, strictjson.Limits{}, `"id"`},
		{"id a number", `{"id":7}`, strictjson.Limits{}, `"id"`},
		{"too big", `{"id":"did:web:a.example","x":"` + strings.Repeat("a", 100) + `"}`, strictjson.Limits{MaxBytes: 64}, "64"},
		{"too deep", `{"id":"did:web:a.example","x":[[[[[[[[[[]]]]]]]]]]}`, strictjson.Limits{}, "depth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDIDDocument([]byte(tc.doc), tc.lim)
			var r Reason
			if !errors.As(err, &r) || r.Code != CodeDIDDocumentInvalid || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %s mentioning %q", err, CodeDIDDocumentInvalid, tc.want)
			}
		})
	}
}

// TestAssertionKeysSkipsUnfit: methods that fail a rule are left out.
func TestAssertionKeysSkipsUnfit(t *testing.T) {
	good := testsupport.Key(t, jose.ES256).Public().(*ecdsa.PublicKey)
	jwk, err := jose.NewJWK(good, "-", jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	method := func(id, controller, extra string) string {
		return `{"id":"` + id + `","type":"JsonWebKey2020","controller":"` + controller + `","publicKeyJwk":{"kty":"EC","crv":"P-256","x":"` + jwk.X + `","y":"` + jwk.Y + `"` + extra + `}}`
	}
	doc := `{"id":"did:web:a.example","assertionMethod":[` + strings.Join([]string{
		method("#good", "did:web:a.example", ""),
		method("#private", "did:web:a.example", `,"d":"AAAA"`),
		method("#delegated", "did:web:b.example", ""),
		method("did:web:b.example#foreign", "did:web:a.example", ""),
		method("#enc", "did:web:a.example", `,"use":"enc"`),
	}, ",") + `]}`
	d, err := ParseDIDDocument([]byte(doc), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := d.AssertionKeys()
	if err != nil || len(keys) != 1 || keys[0].Fragment != "good" || !keys[0].Public.Equal(good) {
		t.Errorf("AssertionKeys: %v %+v", err, keys)
	}
}

// TestParseDIDDocumentMethodCap: a document of thousands of references and
// methods (small enough for the byte and value caps) is refused at parse,
// before any key selection compares each reference with each method.
func TestParseDIDDocumentMethodCap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refs, vm int
		ok       bool
	}{
		{"at the cap", MaxDIDMethods, MaxDIDMethods, true},
		{"references over the cap", MaxDIDMethods + 1, 1, false},
		{"methods over the cap", 1, MaxDIDMethods + 1, false},
		{"the review's bomb", 2000, 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := `{"id":"did:web:a.example","assertionMethod":[` + strings.TrimSuffix(strings.Repeat(`"#k",`, tc.refs), ",") +
				`],"verificationMethod":[` + strings.TrimSuffix(strings.Repeat(`{"id":"#k"},`, tc.vm), ",") + `]}`
			_, err := ParseDIDDocument([]byte(doc), strictjson.Limits{MaxBytes: 1 << 20, MaxValues: 1 << 20})
			var r Reason
			if tc.ok != (err == nil) || !tc.ok && (!errors.As(err, &r) || r.Code != CodeDIDDocumentInvalid || !strings.Contains(r.Detail, "more than")) {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
		})
	}
}
