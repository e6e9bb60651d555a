package aicatalog

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// mapResolver serves DID documents from a map; mapFetcher artifacts.
type mapResolver map[string][]byte

func (m mapResolver) ResolveDID(_ context.Context, did string) ([]byte, error) {
	if b, ok := m[did]; ok {
		return b, nil
	}
	return nil, errors.New("404 Not Found")
}

type mapFetcher map[string][]byte

func (m mapFetcher) FetchArtifact(_ context.Context, url string) ([]byte, error) {
	if b, ok := m[url]; ok {
		return b, nil
	}
	return nil, errors.New("404 Not Found")
}

var (
	issued   = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	expires  = time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)
	verifyAt = time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
)

const (
	pubDomain  = "publisher.example"
	agentURL   = "https://publisher.example/finance.json"
	agentCard  = `{"name":"Finance Agent","url":"https://agents.publisher.example/finance","version":"2.0.1"}`
	agentID    = "urn:air:publisher.example:agent:finance"
	registryID = "did:web:registry.example"
)

// world is a set of DIDs with their keys, the artifacts, and a catalog to
// sign and verify.
type world struct {
	t        testing.TB
	keys     map[string]crypto.Signer // by kid
	resolver mapResolver
	fetcher  mapFetcher
}

func newWorld(t testing.TB) *world {
	w := &world{t: t, keys: map[string]crypto.Signer{}, resolver: mapResolver{}, fetcher: mapFetcher{agentURL: []byte(agentCard)}}
	w.did(pubDomain, "release-key")
	w.did("registry.example", "catalog-key")
	w.did("assessor.example", "assessment-key")
	return w
}

// did makes domain's DID document with one fresh P-256 key under frag.
func (w *world) did(domain, frag string) {
	k := testsupport.Key(w.t, jose.ES256)
	w.keys[KID(DID(domain), frag)] = k
	doc, err := DIDDocument(domain, []VerificationKey{{Fragment: frag, Public: k.Public()}})
	if err != nil {
		w.t.Fatal(err)
	}
	w.resolver[DID(domain)] = doc
}

func (w *world) signingKey(kid string) SigningKey {
	did, frag, _ := strings.Cut(kid, "#")
	return SigningKey{Signer: w.keys[kid], DID: did, Fragment: frag}
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// manifest signs a publisher manifest for the agent entry.
func (w *world) manifest(kid string, sub Subject) strictjson.Value {
	k := w.signingKey(kid)
	m := Manifest{Contributor: k.DID, Subject: sub, Provenance: []Provenance{{RelationPublishedFrom, "https://github.com/publisher-example/demo"}}}
	s, err := Sign(context.Background(), m.Value(), TypManifest, k, issued, expires)
	if err != nil {
		w.t.Fatal(err)
	}
	return s.Value
}

func agentSubject() Subject {
	return Subject{Identifier: agentID, Type: A2ACardType, Digest: digestOf([]byte(agentCard)), URL: agentURL}
}

func (w *world) entry() Entry {
	return Entry{Identifier: agentID, Type: A2ACardType, URL: agentURL, Digest: digestOf([]byte(agentCard)),
		TrustManifests: []strictjson.Value{w.manifest(KID(DID(pubDomain), "release-key"), agentSubject())}}
}

// catalog signs a catalog of entries as the registry.
func (w *world) catalog(entries ...Entry) strictjson.Value {
	c := Catalog{Host: Host{DisplayName: "Registry", Identifier: registryID}, Entries: entries}
	s, err := Sign(context.Background(), c.Value(), TypCatalog, w.signingKey(KID(registryID, "catalog-key")), issued, expires)
	if err != nil {
		w.t.Fatal(err)
	}
	return s.Value
}

func (w *world) verify(doc []byte) *Report {
	w.t.Helper()
	rep, err := VerifyCatalog(context.Background(), doc, Options{Now: func() time.Time { return verifyAt }, Resolver: w.resolver, Fetcher: w.fetcher})
	if err != nil {
		w.t.Fatalf("VerifyCatalog: %v", err)
	}
	return rep
}

func codes(rs []Reason) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Code)
	}
	return out
}

func TestVerifyCatalogAccepts(t *testing.T) {
	w := newWorld(t)
	rep := w.verify(w.catalog(w.entry()).Compact())
	if !rep.OK() {
		t.Fatalf("a catalog signed as the spec says is refused: catalog %v, entries %+v", rep.Catalog.Reasons, rep.Entries)
	}
	if rep.Catalog.Signer != registryID || rep.Entries[0].Signer != DID(pubDomain) || !rep.Entries[0].ExpiresAt.Equal(expires) {
		t.Fatalf("report: %+v", rep)
	}
}

// TestVerifyCatalogRefuses: each rule with the code it is refused with.
// mutate changes the signed catalog (a JSON tree), resign says whether
// the root is signed again after (so only the entry's rule can fail).
func TestVerifyCatalogRefuses(t *testing.T) {
	pubKID := KID(DID(pubDomain), "release-key")
	tests := []struct {
		name    string
		entry   func(w *world, e *Entry)
		root    func(w *world, c strictjson.Value) strictjson.Value // after signing
		catalog string                                              // want a code on the catalog line
		want    string                                              // want a code on entry 0
	}{
		{name: "unsigned manifest", want: ReasonUnsigned, entry: func(w *world, e *Entry) {
			e.TrustManifests = []strictjson.Value{Manifest{Contributor: DID(pubDomain), Subject: agentSubject()}.Value()}
		}},
		{name: "contributor case variant", want: ReasonContributorMismatch, entry: func(w *world, e *Entry) {
			m := w.manifest(pubKID, agentSubject())
			setString(t, &m, "did:web:Publisher.example", "contributor")
			// re-signed so only the rule can fail
			s, err := Sign(context.Background(), without(m, "signature"), TypManifest, w.signingKey(pubKID), issued, expires)
			if err != nil {
				t.Fatal(err)
			}
			e.TrustManifests = []strictjson.Value{s.Value}
		}},
		{name: "kid under another DID", want: ReasonKIDNotUnderSigner, entry: func(w *world, e *Entry) {
			k := w.signingKey(KID("did:web:assessor.example", "assessment-key"))
			k.DID = DID(pubDomain) // signer says publisher, kid says assessor
			m := Manifest{Contributor: DID(pubDomain), Subject: agentSubject()}.Value()
			s, err := signWithKID(m, TypManifest, k, KID("did:web:assessor.example", "assessment-key"))
			if err != nil {
				t.Fatal(err)
			}
			e.TrustManifests = []strictjson.Value{s}
		}},
		{name: "version added after signing", want: ReasonVersionCoverage, entry: func(w *world, e *Entry) { e.Version = "1.2.0" }},
		{name: "digest changed after signing", want: ReasonDigestCoverage, entry: func(w *world, e *Entry) { e.Digest = digestOf([]byte("other")) }},
		{name: "url moved to a mirror", want: ReasonURLCoverage, entry: func(w *world, e *Entry) {
			e.URL = "https://mirror.example/finance.json"
			w.fetcher[e.URL] = []byte(agentCard)
		}},
		{name: "artifact bytes changed", want: ReasonArtifactMismatch, entry: func(w *world, e *Entry) { w.fetcher[agentURL] = []byte(agentCard + " ") }},
		{name: "artifact unavailable", want: ReasonArtifactUnavailable, entry: func(w *world, e *Entry) { delete(w.fetcher, agentURL) }},
		{name: "weak digest", want: ReasonDigestWeak, entry: func(w *world, e *Entry) {
			sub := agentSubject()
			sub.Digest = "sha1:" + strings.Repeat("a", 40)
			e.Digest = sub.Digest
			e.TrustManifests = []strictjson.Value{w.manifest(pubKID, sub)}
		}},
		{name: "signed by an assessor only", want: ReasonNoPublisherManifest, entry: func(w *world, e *Entry) {
			e.TrustManifests = []strictjson.Value{w.manifest(KID("did:web:assessor.example", "assessment-key"), agentSubject())}
		}},
		{name: "publisher not a root domain", want: ReasonPublisherNotDomain, entry: func(w *world, e *Entry) {
			e.Identifier = "urn:air:127.0.0.1:agent:finance"
		}},
		{name: "not urn:air", want: ReasonNotURNAir, entry: func(w *world, e *Entry) { e.Identifier = "https://publisher.example/finance" }},
		{name: "key revoked from the DID document", want: ReasonKeyNotAuthorized, entry: func(w *world, e *Entry) {
			w.did(pubDomain, "new-key")
		}},
		{name: "DID document of another DID", want: ReasonDIDDocumentIDMismatch, entry: func(w *world, e *Entry) {
			w.resolver[DID(pubDomain)] = w.resolver["did:web:assessor.example"]
		}},
		{name: "DID document with duplicate members", want: ReasonDIDDocumentInvalid, entry: func(w *world, e *Entry) {
			w.resolver[DID(pubDomain)] = []byte(`{"id":"did:web:publisher.example","id":"did:web:publisher.example"}`)
		}},
		{name: "private member in the JWK", want: ReasonJWKPrivate, entry: func(w *world, e *Entry) {
			doc := string(w.resolver[DID(pubDomain)])
			w.resolver[DID(pubDomain)] = []byte(strings.Replace(doc, `"publicKeyJwk":{`, `"publicKeyJwk":{"d":"AAAA",`, 1))
		}},
		{name: "catalog typ on a manifest", want: ReasonJWSTypMismatch, entry: func(w *world, e *Entry) {
			m := Manifest{Contributor: DID(pubDomain), Subject: agentSubject()}.Value()
			s, err := Sign(context.Background(), m, TypCatalog, w.signingKey(pubKID), issued, expires)
			if err != nil {
				t.Fatal(err)
			}
			e.TrustManifests = []strictjson.Value{s.Value}
		}},
		{name: "catalog without host.identifier", catalog: ReasonHostIdentifierMissing, root: func(w *world, c strictjson.Value) strictjson.Value {
			host, _ := c.Get("host")
			host.Obj = host.Obj[:1]
			setMember(&c, "host", host)
			s, err := Sign(context.Background(), without(c, "signature"), TypCatalog, w.signingKey(KID(registryID, "catalog-key")), issued, expires)
			if err != nil {
				t.Fatal(err)
			}
			return s.Value
		}},
		{name: "catalog signed by another DID", catalog: ReasonHostSignerMismatch, root: func(w *world, c strictjson.Value) strictjson.Value {
			s, err := Sign(context.Background(), without(c, "signature"), TypCatalog, w.signingKey(KID("did:web:assessor.example", "assessment-key")), issued, expires)
			if err != nil {
				t.Fatal(err)
			}
			return s.Value
		}},
		{name: "catalog changed after signing", catalog: ReasonSignatureInvalid, root: func(w *world, c strictjson.Value) strictjson.Value {
			host, _ := c.Get("host")
			host.Obj[0].Val = strictjson.StringValue("Evil")
			setMember(&c, "host", host)
			return c
		}},
		{name: "catalog unsigned", catalog: ReasonCatalogUnsigned, root: func(w *world, c strictjson.Value) strictjson.Value { return without(c, "signature") }},
		{name: "additionalSignatures are outside the payload", root: func(w *world, c strictjson.Value) strictjson.Value {
			c.Obj = append(c.Obj, strictjson.Member{Key: "additionalSignatures", Val: strictjson.ArrayValue(strictjson.StringValue("x"))})
			return c
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			e := w.entry()
			if tc.entry != nil {
				tc.entry(w, &e)
			}
			c := w.catalog(e)
			if tc.root != nil {
				c = tc.root(w, c)
			}
			rep := w.verify(c.Compact())
			if got := codes(rep.Catalog.Reasons); tc.catalog == "" && len(got) > 0 || tc.catalog != "" && !contains(got, tc.catalog) {
				t.Errorf("catalog: %v, want %q", rep.Catalog.Reasons, tc.catalog)
			}
			if got := codes(rep.Entries[0].Reasons); tc.want == "" && len(got) > 0 || tc.want != "" && !contains(got, tc.want) {
				t.Errorf("entry: %v, want %q", rep.Entries[0].Reasons, tc.want)
			}
			if (tc.want == "") != rep.Entries[0].Accepted {
				t.Errorf("entry accepted %v with reasons %v", rep.Entries[0].Accepted, rep.Entries[0].Reasons)
			}
		})
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func without(v strictjson.Value, key string) strictjson.Value {
	out := strictjson.Value{Kind: strictjson.Object}
	for _, m := range v.Obj {
		if m.Key != key {
			out.Obj = append(out.Obj, m)
		}
	}
	return out
}

func setMember(v *strictjson.Value, key string, val strictjson.Value) {
	for i := range v.Obj {
		if v.Obj[i].Key == key {
			v.Obj[i].Val = val
			return
		}
	}
	v.Obj = append(v.Obj, strictjson.Member{Key: key, Val: val})
}

func setString(t *testing.T, v *strictjson.Value, s, key string) {
	t.Helper()
	setMember(v, key, strictjson.StringValue(s))
}

// signWithKID signs like Sign but with a kid of the caller's choosing (a
// hostile producer's), to test the rules a verifier applies to it.
func signWithKID(v strictjson.Value, typ string, k SigningKey, kid string) (strictjson.Value, error) {
	v = without(v, "signature")
	v.Obj = append(v.Obj, strictjson.Member{Key: "signature", Val: strictjson.ObjectValue(
		strictjson.Member{Key: "signer", Val: strictjson.StringValue(k.DID)},
		strictjson.Member{Key: "profile", Val: strictjson.StringValue(Profile)},
		strictjson.Member{Key: "issuedAt", Val: strictjson.StringValue(issued.Format(TimeFormat))},
	)})
	payload, err := Payload(v)
	if err != nil {
		return v, err
	}
	header := fmt.Sprintf(`{"alg":"ES256","kid":%q,"typ":%q}`, kid, typ)
	protected := b64([]byte(header))
	sig, err := jose.Sign(context.Background(), k.Signer, jose.ES256, []byte(protected+"."+b64(payload)))
	if err != nil {
		return v, err
	}
	sigObj := &v.Obj[len(v.Obj)-1].Val
	sigObj.Obj = append(sigObj.Obj, strictjson.Member{Key: "jws", Val: strictjson.StringValue(protected + ".." + b64(sig))})
	return v, nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
