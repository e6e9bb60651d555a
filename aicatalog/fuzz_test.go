package aicatalog

import (
	"bytes"
	"testing"

	"github.com/cardsign/cardsign/strictjson"
)

// FuzzVerifyCatalog: no input panics, and a catalog is accepted only when
// it says what the one signed catalog said (same payload): whitespace,
// member order, escapes and additionalSignatures may change, nothing else.
func FuzzVerifyCatalog(f *testing.F) {
	fx := newFixture(f)
	root := fx.catalog()
	want, err := Payload(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(root.Compact())
	f.Add(root.Indent())
	f.Add(reverseAll(root).Compact())
	f.Add([]byte(`{"specVersion":"1.0","entries":[{"identifier":"x","type":"t","url":"https://a.example/","trustManifests":[{"signature":{}}]}]}`))
	f.Add([]byte(`{"entries":[],"signature":{"signer":"did:web:a.example","profile":"did-web-v1","issuedAt":"2026-10-01T00:00:00Z","jws":"e30..AA"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := fx.verify(data)
		if err != nil {
			return
		}
		if !rep.OK() || len(rep.Entries) == 0 {
			return
		}
		v, err := strictjson.Parse(data, strictjson.Limits{})
		if err != nil {
			t.Fatalf("accepted a document strictjson refuses: %v", err)
		}
		got, err := Payload(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("accepted a changed catalog: %s", data)
		}
	})
}

// FuzzParseDIDDocument: no input panics, and every key AssertionKeys
// offers is one SelectKey would pick for its kid.
func FuzzParseDIDDocument(f *testing.F) {
	fx := newFixture(f)
	for _, d := range fx.docs {
		f.Add(d.Compact())
	}
	f.Add([]byte(`{"id":"did:web:a.example","assertionMethod":["#k",{"id":"#k"}],"verificationMethod":[{"id":"#k"}]}`))
	f.Add([]byte(`{"id":"did:web:a.example","assertionMethod":[{"id":"#k","controller":"did:web:a.example","publicKeyJwk":{"kty":"EC","crv":"P-256","x":"","y":"","key_ops":[]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := ParseDIDDocument(data, strictjson.Limits{})
		if err != nil {
			return
		}
		keys, err := doc.AssertionKeys()
		if err != nil {
			return
		}
		for _, k := range keys {
			pub, err := doc.SelectKey(k.KID, doc.ID)
			if err != nil || !pub.Equal(k.Public) {
				t.Fatalf("AssertionKeys offers %s, SelectKey says %v", k.KID, err)
			}
		}
		_, _ = doc.SelectKey(doc.ID+"#k", doc.ID)
	})
}
