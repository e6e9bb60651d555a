package aicatalog

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// TestVerifyCatalogUnreadable: documents that are not a catalog at all are
// errors naming the strictjson rule, never a report.
func TestVerifyCatalogUnreadable(t *testing.T) {
	f := newFixture(t)
	good := f.catalog().Compact()
	cases := []struct {
		name string
		data []byte
		lim  strictjson.Limits
		rule string
		msg  string
	}{
		{name: "duplicate specVersion", data: append([]byte(`{"specVersion":"1.0",`), good[1:]...), rule: strictjson.RuleDuplicateKey},
		{name: "duplicate in an entry", data: bytes.Replace(good, []byte(`"type":`), []byte(`"type":"x","type":`), 1), rule: strictjson.RuleDuplicateKey},
		{name: "oversized", data: good, lim: strictjson.Limits{MaxBytes: len(good) - 1}, rule: strictjson.RuleSize},
		{name: "deeply nested", data: append([]byte(`{"x":`+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`,`), good[1:]...), rule: strictjson.RuleDepth},
		{name: "too many values", data: good, lim: strictjson.Limits{MaxValues: 10}, rule: strictjson.RuleMaxValues},
		{name: "bad UTF-8", data: append([]byte("{\"x\":\"\xc3\x28\","), good[1:]...), rule: strictjson.RuleUTF8},
		{name: "lone surrogate", data: append([]byte(`{"x":"\ud800",`), good[1:]...), rule: strictjson.RuleSurrogate},
		{name: "an array", data: []byte(`[]`), rule: strictjson.RuleNotObject},
		{name: "trailing data", data: append(slicesClone(good), `{}`...), rule: strictjson.RuleTrailingData},
		{name: "no entries", data: []byte(`{"specVersion":"1.0"}`), msg: `"entries" must be an array`},
		{name: "entries an object", data: []byte(`{"specVersion":"1.0","entries":{}}`), msg: `"entries" must be an array`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f.opts.Limits = tc.lim
			rep, err := f.verify(tc.data)
			if err == nil {
				t.Fatalf("accepted: %+v", rep)
			}
			var se *strictjson.Error
			switch {
			case tc.rule != "" && (!errors.As(err, &se) || se.Rule != tc.rule):
				t.Errorf("error %v, want rule %s", err, tc.rule)
			case tc.msg != "" && !strings.Contains(err.Error(), tc.msg):
				t.Errorf("error %v, want %q", err, tc.msg)
			}
		})
	}
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

// TestVerifyReasonDetails: every string a document controls is printed
// escaped, and the detail names the manifest's place and field.
func TestVerifyReasonDetails(t *testing.T) {
	f := newFixture(t)
	f.assessor().m.Contributor = "did:web:evil\n\x1b[31m.example"
	rep := f.run()
	r := rep.Entries[0].Manifests[1].Reasons
	if len(r) != 1 || r[0].Code != CodeContributorSignerMismatch {
		t.Fatalf("reasons %q", r)
	}
	d := r[0].Detail
	if strings.ContainsAny(d, "\n\x1b") || !strings.Contains(d, `\n`) || !strings.HasPrefix(d, "entries[0].trustManifests[1].signature.signer: ") {
		t.Errorf("detail %q: want the path first and the contributor escaped", d)
	}
	if rep.Entries[0].Accepted != true {
		t.Errorf("the publisher's manifest still authorizes entry 0: %+v", rep.Entries[0])
	}
}

// TestVerifyRoundTrip: what Sign makes VerifyCatalog accepts, and changing
// any one byte of the document makes it refuse (or fail to read) it, or
// leaves a document with the same signed content.
func TestVerifyRoundTrip(t *testing.T) {
	f := newFixture(t)
	f.entries = f.entries[1:]
	root := f.catalog()
	data := root.Compact()
	want, err := Payload(root)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := f.verify(data)
	if err != nil || !rep.OK() {
		t.Fatalf("signed catalog refused: %v %+v", err, rep)
	}
	for i := range data {
		mutated := slicesClone(data)
		mutated[i] ^= 0x01
		rep, err := f.verify(mutated)
		if err != nil || !rep.OK() {
			continue
		}
		// Accepted: then it must say what the original said.
		v, err := strictjson.Parse(mutated, strictjson.Limits{})
		if err != nil {
			t.Fatalf("byte %d: accepted but unreadable: %v", i, err)
		}
		got, err := Payload(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("byte %d (%q): accepted a changed document %s", i, data[i], mutated)
		}
	}
}

// TestVerifyManifestAlone: VerifyManifest on one entry and manifest.
func TestVerifyManifestAlone(t *testing.T) {
	f := newFixture(t)
	root := f.catalog()
	entries, _ := root.Get("entries")
	e := entries.Arr[1]
	tm, _ := e.Get("trustManifests")
	res := &mapResolver{docs: map[string][]byte{pubDID: f.docs[pubDID].Compact()}, calls: map[string]int{}}
	opts := Options{Now: func() time.Time { return fxNow }, Resolver: res, Fetcher: mapFetcher(f.artifacts)}
	if r := VerifyManifest(context.Background(), e, tm.Arr[0], opts); !r.Accepted || r.Signer != pubDID {
		t.Errorf("refused: %+v", r)
	}
	opts.Fetcher = nil
	r := VerifyManifest(context.Background(), e, tm.Arr[0], opts)
	if !sameCodes(r.Reasons, []string{CodeArtifactUnavailable}) {
		t.Errorf("without a fetcher: %+v", r)
	}
	opts.Resolver = nil
	r = VerifyManifest(context.Background(), e, tm.Arr[0], opts)
	if !sameCodes(r.Reasons, []string{CodeDIDResolutionFailed}) {
		t.Errorf("without a resolver: %+v", r)
	}
	if r := VerifyCatalogSignature(context.Background(), root, Options{Now: opts.Now, Resolver: &mapResolver{docs: map[string][]byte{registryDID: f.docs[registryDID].Compact()}, calls: map[string]int{}}}); !r.Accepted || r.Signer != registryDID {
		t.Errorf("root refused: %+v", r)
	}
}

// TestInteropSpecVector: the specification's own vector (positive control
// fixture, entry 1, manifest 0; third-party test material) proves that
// Payload builds the bytes the spec's tools sign, and that the whole
// manifest procedure accepts their signature.
func TestInteropSpecVector(t *testing.T) {
	const (
		x       = "q8kKSY-aRUtNKnKFqhnsVt2i4DtIKc5pNdQrPhnBW00"
		y       = "15F0eddIJShYEnudvW3vOb7SDowzRHwAzQsVVgnXjnM"
		payload = `{"contributor":"did:web:publisher.example","provenance":[{"relation":"publishedFrom","sourceId":"https://github.com/publisher-example/demo"}],"signature":{"expiresAt":"2026-12-31T00:00:00Z","issuedAt":"2026-10-01T00:00:00Z","profile":"did-web-v1","signer":"did:web:publisher.example"},"subject":{"digest":"sha256:09858221d1b99ec8266505b33d81edc038978228a5fafe7b835d646f8125fbe0","identifier":"urn:air:publisher.example:agent:finance","type":"application/a2a-agent-card+json","url":"https://publisher.example/finance.json"}}`
		jws     = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImRpZDp3ZWI6cHVibGlzaGVyLmV4YW1wbGUjcmVsZWFzZS1rZXkiLCJ0eXAiOiJhaS1jYXRhbG9nLXRydXN0LW1hbmlmZXN0K2p3cyJ9..OIiUsPJGzhMc2Dki2wAlHZh3wRHAIbAE6I6JV5PshxoBIaxrXuuSeIeAL1Q6zgquS5-_w3RlZXTSUsCM15ST8w"
		card    = `{"name":"Finance Agent","url":"https://agents.publisher.example/finance","version":"2.0.1"}`
	)
	pub, err := jose.JWK{Kty: "EC", Crv: "P-256", X: x, Y: y}.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	// The manifest as a catalog holds it: members reordered, jws in place.
	parsed, err := strictjson.Parse([]byte(payload), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	m := reverseAll(setJWS(parsed, jws))
	got, err := Payload(m)
	if err != nil || string(got) != payload {
		t.Fatalf("Payload:\n got %s\nwant %s (%v)", got, payload, err)
	}
	h, sig, _ := strings.Cut(jws, "..")
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		t.Fatal(err)
	}
	if err := jose.Verify(jose.ES256, pub, []byte(h+"."+base64.RawURLEncoding.EncodeToString(got)), raw); err != nil {
		t.Fatalf("the spec's signature does not verify over our payload: %v", err)
	}
	doc, err := DIDDocument("publisher.example", []VerificationKey{{Fragment: "release-key", Public: pub.(*ecdsa.PublicKey)}})
	if err != nil {
		t.Fatal(err)
	}
	entry := Entry{Identifier: "urn:air:publisher.example:agent:finance", Type: A2ACardType, URL: "https://publisher.example/finance.json",
		Digest: "sha256:09858221d1b99ec8266505b33d81edc038978228a5fafe7b835d646f8125fbe0"}.Value()
	opts := Options{
		Now:      func() time.Time { return fxNow },
		Resolver: &mapResolver{docs: map[string][]byte{"did:web:publisher.example": doc}, calls: map[string]int{}},
		Fetcher:  mapFetcher{"https://publisher.example/finance.json": []byte(card)},
	}
	if r := VerifyManifest(context.Background(), entry, m, opts); !r.Accepted {
		t.Errorf("the spec's manifest refused: %+v", r)
	}
	// and a single changed byte of the payload is refused
	m = m.With("contributor", str("did:web:publisher.exampld"))
	if r := VerifyManifest(context.Background(), entry, m, opts); r.Accepted {
		t.Errorf("changed manifest accepted")
	}
}

// countingFetcher counts the artifacts asked for.
type countingFetcher struct {
	mapFetcher
	n int
}

func (c *countingFetcher) FetchArtifact(ctx context.Context, url string) ([]byte, error) {
	c.n++
	return c.mapFetcher.FetchArtifact(ctx, url)
}

// TestMaxArtifacts: a catalog of more url entries than MaxArtifacts gets
// that many fetches, and the entries beyond are refused as
// artifact-unavailable, not fetched.
func TestMaxArtifacts(t *testing.T) {
	k := key(t, "did:web:pub.example", "k")
	fetch := &countingFetcher{mapFetcher: mapFetcher{}}
	var entries []Entry
	for i := range 3 {
		u := fmt.Sprintf("https://pub.example/a%d.json", i)
		body := []byte(fmt.Sprintf(`{"n":%d}`, i))
		fetch.mapFetcher[u] = body
		sum := sha256.Sum256(body)
		e := Entry{Identifier: fmt.Sprintf("urn:air:pub.example:a2a:a%d", i), Type: A2ACardType, URL: u, Digest: "sha256:" + hex.EncodeToString(sum[:])}
		m, err := Sign(t.Context(), Manifest{Contributor: k.DID, Subject: Subject{Identifier: e.Identifier, Type: e.Type, Digest: e.Digest, URL: u}}.Value(), TypManifest, k, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		e.TrustManifests = []strictjson.Value{m.Value}
		entries = append(entries, e)
	}
	doc := Catalog{Host: Host{DisplayName: "x", Identifier: k.DID}, Entries: entries}.Value()
	res := &mapResolver{docs: map[string][]byte{k.DID: didDocValue(t, "pub.example", k).Compact()}, calls: map[string]int{}}
	rep, err := VerifyCatalog(t.Context(), doc.Compact(), Options{Resolver: res, Fetcher: fetch, MaxArtifacts: 2})
	if err != nil {
		t.Fatal(err)
	}
	if fetch.n != 2 || !rep.Entries[0].Accepted || !rep.Entries[1].Accepted || rep.Entries[2].Accepted ||
		len(rep.Entries[2].Reasons) == 0 || rep.Entries[2].Reasons[0].Code != CodeArtifactUnavailable {
		t.Fatalf("fetched %d, entries %+v", fetch.n, rep.Entries)
	}
}

// TestNewestPublisherManifest: of two acceptable publisher manifests, the
// entry's result is the one issued last, wherever it stands.
func TestNewestPublisherManifest(t *testing.T) {
	k := key(t, "did:web:pub.example", "k")
	body := []byte(`{"n":1}`)
	sum := sha256.Sum256(body)
	e := Entry{Identifier: "urn:air:pub.example:a2a:a", Type: A2ACardType, URL: "https://pub.example/a.json", Digest: "sha256:" + hex.EncodeToString(sum[:])}
	now := time.Now().Truncate(time.Second)
	for _, at := range []time.Time{now.Add(-time.Minute), now.Add(-time.Hour)} {
		m, err := Sign(t.Context(), Manifest{Contributor: k.DID, Subject: Subject{Identifier: e.Identifier, Type: e.Type, Digest: e.Digest}}.Value(), TypManifest, k, at, now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		e.TrustManifests = append(e.TrustManifests, m.Value)
	}
	e.TrustManifests[0], e.TrustManifests[1] = e.TrustManifests[1], e.TrustManifests[0] // the older first
	doc := Catalog{Host: Host{DisplayName: "x", Identifier: k.DID}, Entries: []Entry{e}}.Value()
	res := &mapResolver{docs: map[string][]byte{k.DID: didDocValue(t, "pub.example", k).Compact()}, calls: map[string]int{}}
	rep, err := VerifyCatalog(t.Context(), doc.Compact(), Options{Resolver: res, Fetcher: mapFetcher{e.URL: body}})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Entries[0]; !got.Accepted || got.Manifest != 1 || !got.IssuedAt.Equal(now.Add(-time.Minute)) {
		t.Fatalf("entry: manifest %d issued %s, want manifest 1 issued %s", got.Manifest, got.IssuedAt, now.Add(-time.Minute))
	}
}
