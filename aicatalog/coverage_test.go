package aicatalog

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// TestEntryCoverage: Entry Release Coverage and the entries' structure,
// each case one entry of a correctly signed catalog.
func TestEntryCoverage(t *testing.T) {
	pubKID := KID(DID(pubDomain), "release-key")
	inline := strictjson.ObjectValue(strictjson.Member{Key: "name", Val: strictjson.StringValue("Demo")})
	inlineJCS, _ := inline.JCS()
	tests := []struct {
		name string
		edit func(w *world, e *Entry)
		want string
	}{
		{name: "inline data, digest of its RFC 8785 form", edit: func(w *world, e *Entry) {
			e.URL, e.Data, e.Digest = "", &inline, digestOf(inlineJCS)
			e.TrustManifests = []strictjson.Value{w.manifest(pubKID, Subject{Identifier: agentID, Type: A2ACardType, Digest: e.Digest})}
		}},
		{name: "inline data changed after signing", want: ReasonDigestCoverage, edit: func(w *world, e *Entry) {
			e.URL, e.Data, e.Digest = "", &inline, digestOf(inlineJCS)
			e.TrustManifests = []strictjson.Value{w.manifest(pubKID, Subject{Identifier: agentID, Type: A2ACardType, Digest: e.Digest})}
			other := strictjson.ObjectValue(strictjson.Member{Key: "name", Val: strictjson.StringValue("Evil")})
			b, _ := other.JCS()
			e.Data, e.Digest = &other, digestOf(b)
		}},
		{name: "inline data, digest kept, data changed", want: ReasonArtifactMismatch, edit: func(w *world, e *Entry) {
			e.URL, e.Data, e.Digest = "", &inline, digestOf(inlineJCS)
			e.TrustManifests = []strictjson.Value{w.manifest(pubKID, Subject{Identifier: agentID, Type: A2ACardType, Digest: e.Digest})}
			other := strictjson.ObjectValue(strictjson.Member{Key: "name", Val: strictjson.StringValue("Evil")})
			e.Data = &other
		}},
		{name: "url binding only", edit: func(w *world, e *Entry) {
			e.Digest = ""
			e.TrustManifests = []strictjson.Value{w.manifest(pubKID, Subject{Identifier: agentID, Type: A2ACardType, URL: agentURL})}
		}},
		{name: "digest binding only", edit: func(w *world, e *Entry) {
			e.TrustManifests = []strictjson.Value{w.manifest(pubKID, Subject{Identifier: agentID, Type: A2ACardType, Digest: e.Digest})}
		}},
		{name: "neither binding", want: ReasonSubjectNoBinding, edit: func(w *world, e *Entry) {
			e.Digest = ""
			e.TrustManifests = []strictjson.Value{w.manifest(pubKID, Subject{Identifier: agentID, Type: A2ACardType})}
		}},
		{name: "subject url not https", want: ReasonSubjectURLNotHTTPS, edit: func(w *world, e *Entry) {
			e.URL = "http://publisher.example/finance.json"
			e.TrustManifests = []strictjson.Value{w.manifest(pubKID, Subject{Identifier: agentID, Type: A2ACardType, URL: e.URL, Digest: e.Digest})}
		}},
		{name: "subject of another type", want: ReasonSubjectType, edit: func(w *world, e *Entry) {
			e.Type = "application/mcp-server-card+json"
		}},
		{name: "subject of another identifier", want: ReasonSubjectIdentifier, edit: func(w *world, e *Entry) {
			e.Identifier = "urn:air:publisher.example:agent:payroll"
		}},
		{name: "digest and url swapped, subject rewritten", want: ReasonSignatureInvalid, edit: func(w *world, e *Entry) {
			m := e.TrustManifests[0]
			sub, _ := m.Get("subject")
			sub.Obj[3].Val = strictjson.StringValue("https://mirror.example/finance.json") // url
			setMember(&m, "subject", sub)
			e.URL = "https://mirror.example/finance.json"
			w.fetcher[e.URL] = []byte(agentCard)
			e.TrustManifests = []strictjson.Value{m}
		}},
		{name: "digest algorithm unknown", want: ReasonDigestFormat, edit: func(w *world, e *Entry) {
			sub := agentSubject()
			sub.Digest = "blake9:" + strings.Repeat("a", 64)
			e.Digest = sub.Digest
			e.TrustManifests = []strictjson.Value{w.manifest(pubKID, sub)}
		}},
		{name: "digest in upper-case hex", want: ReasonDigestFormat, edit: func(w *world, e *Entry) {
			sub := agentSubject()
			sub.Digest = strings.ToUpper(sub.Digest[7:])
			sub.Digest = "sha256:" + sub.Digest
			e.Digest = sub.Digest
			e.TrustManifests = []strictjson.Value{w.manifest(pubKID, sub)}
		}},
		{name: "no trust manifests", want: ReasonNoPublisherManifest, edit: func(w *world, e *Entry) { e.TrustManifests = nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			e := w.entry()
			tc.edit(w, &e)
			rep := w.verify(w.catalog(e).Compact())
			got := rep.Entries[0]
			if tc.want == "" {
				if !got.Accepted || !rep.OK() {
					t.Fatalf("refused: %v %v", got.Reasons, rep.Catalog.Reasons)
				}
				return
			}
			if got.Accepted || !contains(codes(got.Reasons), tc.want) {
				t.Fatalf("reasons %v, want %s", got.Reasons, tc.want)
			}
		})
	}
}

// TestCatalogStructure: what VerifyCatalog cannot read at all (an error)
// and the catalog's own rules (reasons).
func TestCatalogStructure(t *testing.T) {
	w := newWorld(t)
	deep := `{"specVersion":"1.0","entries":[],"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`
	for name, doc := range map[string]string{
		"not JSON":          "<html>",
		"duplicate members": `{"specVersion":"1.0","entries":[],"entries":[]}`,
		"too deep":          deep,
		"too big":           `{"specVersion":"1.0","entries":[],"x":"` + strings.Repeat("a", MaxCatalogBytes) + `"}`,
		"no entries":        `{"specVersion":"1.0"}`,
		"bad UTF-8":         "{\"specVersion\":\"1.0\",\"entries\":[],\"x\":\"\xff\"}",
	} {
		if _, err := VerifyCatalog(context.Background(), []byte(doc), Options{Resolver: w.resolver}); err == nil {
			t.Errorf("%s: read", name)
		}
	}

	two := w.entry()
	dup := w.catalog(w.entry(), two)
	rep := w.verify(dup.Compact())
	if rep.Entries[0].Accepted != true || !contains(codes(rep.Entries[1].Reasons), ReasonIdentifierDuplicate) {
		t.Errorf("two entries with one identifier: %+v", rep.Entries)
	}

	c := w.catalog(w.entry())
	setString(t, &c, "2.0", "specVersion")
	if rep := w.verify(c.Compact()); !contains(codes(rep.Catalog.Reasons), ReasonSpecVersion) {
		t.Errorf("specVersion 2.0: %v", rep.Catalog.Reasons)
	}

	e := w.entry().Value()
	e.Obj = append(e.Obj, strictjson.Member{Key: "data", Val: strictjson.ObjectValue()})
	c = w.catalog()
	entries, _ := c.Get("entries")
	entries.Arr = append(entries.Arr, e, strictjson.StringValue("entry"))
	setMember(&c, "entries", entries)
	rep = w.verify(c.Compact())
	if len(rep.Entries) != 2 || !contains(codes(rep.Entries[0].Reasons), ReasonEntryInvalid) || !contains(codes(rep.Entries[1].Reasons), ReasonEntryInvalid) {
		t.Errorf("an entry with url and data, and an entry not an object: %+v", rep.Entries)
	}
}

// TestSpecVector: the specification's own test material (the conformance
// fixtures' publisher key and manifest, "TEST MATERIAL ONLY") checks that
// our payload is byte for byte theirs and that their JWS verifies over it.
func TestSpecVector(t *testing.T) {
	const (
		x       = "q8kKSY-aRUtNKnKFqhnsVt2i4DtIKc5pNdQrPhnBW00"
		y       = "15F0eddIJShYEnudvW3vOb7SDowzRHwAzQsVVgnXjnM"
		jws     = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImRpZDp3ZWI6cHVibGlzaGVyLmV4YW1wbGUjcmVsZWFzZS1rZXkiLCJ0eXAiOiJhaS1jYXRhbG9nLXRydXN0LW1hbmlmZXN0K2p3cyJ9..OIiUsPJGzhMc2Dki2wAlHZh3wRHAIbAE6I6JV5PshxoBIaxrXuuSeIeAL1Q6zgquS5-_w3RlZXTSUsCM15ST8w"
		payload = `{"contributor":"did:web:publisher.example","provenance":[{"relation":"publishedFrom","sourceId":"https://github.com/publisher-example/demo"}],"signature":{"expiresAt":"2026-12-31T00:00:00Z","issuedAt":"2026-10-01T00:00:00Z","profile":"did-web-v1","signer":"did:web:publisher.example"},"subject":{"digest":"sha256:09858221d1b99ec8266505b33d81edc038978228a5fafe7b835d646f8125fbe0","identifier":"urn:air:publisher.example:agent:finance","type":"application/a2a-agent-card+json","url":"https://publisher.example/finance.json"}}`
	)
	// The manifest as a catalog carries it: members in another order, the jws in place.
	manifest := `{"subject":{"url":"https://publisher.example/finance.json","type":"application/a2a-agent-card+json","identifier":"urn:air:publisher.example:agent:finance","digest":"sha256:09858221d1b99ec8266505b33d81edc038978228a5fafe7b835d646f8125fbe0"},` +
		`"signature":{"jws":"` + jws + `","signer":"did:web:publisher.example","profile":"did-web-v1","issuedAt":"2026-10-01T00:00:00Z","expiresAt":"2026-12-31T00:00:00Z"},` +
		`"provenance":[{"sourceId":"https://github.com/publisher-example/demo","relation":"publishedFrom"}],"contributor":"did:web:publisher.example"}`
	v, err := strictjson.Parse([]byte(manifest), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Payload(v)
	if err != nil || string(got) != payload {
		t.Fatalf("payload:\n%s\nwant\n%s (%v)", got, payload, err)
	}
	pub, err := jose.JWK{Kty: "EC", Crv: "P-256", X: x, Y: y}.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	protected, sig, _ := strings.Cut(jws, "..")
	raw, _ := base64.RawURLEncoding.DecodeString(sig)
	if err := jose.Verify(jose.ES256, pub, []byte(protected+"."+base64.RawURLEncoding.EncodeToString(got)), raw); err != nil {
		t.Fatalf("the specification's JWS does not verify over our payload: %v", err)
	}
	// And through the whole procedure, with their DID document shape.
	did := `{"@context":["https://www.w3.org/ns/did/v1"],"id":"did:web:publisher.example","verificationMethod":[{"id":"did:web:publisher.example#release-key","type":"JsonWebKey2020","controller":"did:web:publisher.example","publicKeyJwk":{"kty":"EC","crv":"P-256","x":"` + x + `","y":"` + y + `","alg":"ES256","use":"sig"}}],"assertionMethod":["#release-key"]}`
	catalog := `{"specVersion":"1.0","entries":[{"identifier":"urn:air:publisher.example:agent:finance","type":"application/a2a-agent-card+json","url":"https://publisher.example/finance.json","digest":"sha256:09858221d1b99ec8266505b33d81edc038978228a5fafe7b835d646f8125fbe0","trustManifests":[` + manifest + `]}]}`
	rep, err := VerifyCatalog(context.Background(), []byte(catalog), Options{
		Now:      func() time.Time { return verifyAt },
		Resolver: mapResolver{"did:web:publisher.example": []byte(did)},
		Fetcher:  mapFetcher{agentURL: []byte(agentCard)},
	})
	if err != nil || !rep.Entries[0].Accepted {
		t.Fatalf("the specification's manifest: %v %+v", err, rep)
	}
}

// FuzzVerifyCatalog: any bytes give an error or a report, never a panic,
// and a mangled signed catalog is never wholly accepted.
func FuzzVerifyCatalog(f *testing.F) {
	w := newWorld(f)
	signed := w.catalog(w.entry()).Compact()
	f.Add(signed)
	f.Add([]byte(`{"specVersion":"1.0","entries":[{}]}`))
	f.Add([]byte(`{"specVersion":"1.0","host":{"identifier":"did:web:a.b"},"signature":{"jws":"a..b"},"entries":[{"identifier":"urn:air:a.b:c:d","type":"t","url":"u","trustManifests":[{"signature":{}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := VerifyCatalog(context.Background(), data, Options{Now: func() time.Time { return verifyAt }, Resolver: w.resolver, Fetcher: w.fetcher})
		if err != nil {
			return
		}
		if rep.OK() && string(data) != string(signed) {
			// the only accepted documents are re-serializations of the
			// signed one: same JSON value, other whitespace or order
			v, perr := strictjson.Parse(data, strictjson.Limits{MaxBytes: MaxCatalogBytes})
			a, _ := v.JCS()
			s, _ := strictjson.Parse(signed, strictjson.Limits{MaxBytes: MaxCatalogBytes})
			b, _ := s.JCS()
			if perr != nil || string(a) != string(b) {
				t.Fatalf("accepted a changed catalog: %q", data)
			}
		}
	})
}

// FuzzParseDIDDocument: never a panic, and every key it yields is on the curve.
func FuzzParseDIDDocument(f *testing.F) {
	w := newWorld(f)
	f.Add(w.resolver[DID(pubDomain)])
	f.Add([]byte(`{"id":"did:web:a.b","assertionMethod":[{"id":"#k","controller":"did:web:a.b","publicKeyJwk":{"kty":"EC","crv":"P-256","x":"","y":""}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDIDDocument(data, strictjson.Limits{})
		if err != nil {
			return
		}
		for frag, k := range d.AssertionKeys() {
			if _, err := k.ECDH(); err != nil {
				t.Fatalf("key %q is not a valid P-256 point: %v", frag, err)
			}
		}
	})
}
