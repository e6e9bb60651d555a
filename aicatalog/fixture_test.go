package aicatalog

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// The fixture re-creates the world of the specification's conformance
// cases (jonathanhefner/ai-catalog, specification/conformance/
// trust-manifest-signatures) with keys made here: publisher.example with
// #release-key in assertionMethod and #auth-key in authentication only,
// assessor.example, other.example, and a registry that signs the catalog.

var (
	fxIssued  = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	fxExpires = time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)
	fxNow     = time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC)
)

const (
	pubDID      = "did:web:publisher.example"
	assessorDID = "did:web:assessor.example"
	otherDID    = "did:web:other.example"
	registryDID = "did:web:registry.example"
	mcpID       = "urn:air:publisher.example:mcp:demo"
	mcpType     = "application/mcp-server-card+json"
	agentID     = "urn:air:publisher.example:agent:finance"
	agentURL    = "https://publisher.example/finance.json"
	policyExt   = "https://ai-catalog.org/extensions/policy-urls"
)

type mapResolver struct {
	docs  map[string][]byte
	calls map[string]int
}

func (m *mapResolver) ResolveDID(_ context.Context, did string) ([]byte, error) {
	m.calls[did]++
	b, ok := m.docs[did]
	if !ok {
		return nil, fmt.Errorf("no DID document for %q", did)
	}
	return b, nil
}

type mapFetcher map[string][]byte

func (m mapFetcher) FetchArtifact(_ context.Context, url string) ([]byte, error) {
	b, ok := m[url]
	if !ok {
		return nil, fmt.Errorf("404 at %q", url)
	}
	return b, nil
}

// manifestSpec is one Trust Manifest before signing.
type manifestSpec struct {
	key             SigningKey
	m               Manifest
	extra           []strictjson.Member // top-level members added before signing
	issued, expires time.Time
	typ             string
	// edit rewrites the signed manifest, which is then signed again with
	// the same key (for what Sign itself refuses to make).
	edit func(strictjson.Value) strictjson.Value
	// header, when set, rewrites the protected header and re-signs.
	header func(strictjson.Value) strictjson.Value
	// post rewrites the signed manifest (the signature is not redone).
	post func(strictjson.Value) strictjson.Value
}

type entrySpec struct {
	e         Entry
	extra     []strictjson.Member
	manifests []*manifestSpec
	post      func(strictjson.Value) strictjson.Value
}

type fixture struct {
	t    testing.TB
	keys map[string]SigningKey // by name: release, auth, assessor, other, registry
	docs map[string]strictjson.Value
	// rawDocs override docs with bytes as served.
	rawDocs   map[string][]byte
	artifacts map[string][]byte
	entries   []*entrySpec
	host      Host
	root      *manifestSpec // the catalog signature; nil: unsigned
	rootPost  func(strictjson.Value) strictjson.Value
	rootExtra []strictjson.Member
	opts      Options
	resolver  *mapResolver
}

func key(t testing.TB, did, frag string) SigningKey {
	return SigningKey{Signer: testsupport.Key(t, jose.ES256), DID: did, Fragment: frag}
}

// didDocValue is DIDDocument's output for keys, parsed back for editing.
func didDocValue(t testing.TB, domain string, keys ...SigningKey) strictjson.Value {
	t.Helper()
	var vks []VerificationKey
	for _, k := range keys {
		vks = append(vks, VerificationKey{Fragment: k.Fragment, Public: k.Signer.Public()})
	}
	b, err := DIDDocument(domain, vks)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strictjson.Parse(b, strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{
		t: t,
		keys: map[string]SigningKey{
			"release":  key(t, pubDID, "release-key"),
			"auth":     key(t, pubDID, "auth-key"),
			"assessor": key(t, assessorDID, "assessment-key"),
			"other":    key(t, otherDID, "key-1"),
			"registry": key(t, registryDID, "catalog-key"),
		},
		rawDocs:   map[string][]byte{},
		artifacts: map[string][]byte{},
		host:      Host{DisplayName: "Fixture Registry", Identifier: registryDID},
	}
	k := f.keys
	pubDoc := didDocValue(t, "publisher.example", k["release"], k["auth"])
	// #auth-key is listed for authentication only.
	vms, _ := pubDoc.Get("verificationMethod")
	pubDoc = pubDoc.With("assertionMethod", strictjson.ArrayValue(strictjson.StringValue(KID(pubDID, "release-key"))))
	pubDoc = pubDoc.With("authentication", strictjson.ArrayValue(strictjson.StringValue(KID(pubDID, "auth-key"))))
	pubDoc = pubDoc.With("verificationMethod", vms)
	f.docs = map[string]strictjson.Value{
		pubDID:      pubDoc,
		assessorDID: didDocValue(t, "assessor.example", k["assessor"]),
		otherDID:    didDocValue(t, "other.example", k["other"]),
		registryDID: didDocValue(t, "registry.example", k["registry"]),
	}

	data := strictjson.ObjectValue(
		strictjson.Member{Key: "name", Val: strictjson.StringValue("Demo MCP")},
		strictjson.Member{Key: "version", Val: strictjson.StringValue("1.0.0")},
		strictjson.Member{Key: "endpoint", Val: strictjson.StringValue("https://mcp.publisher.example/")},
	)
	dataJCS, err := data.JCS()
	if err != nil {
		t.Fatal(err)
	}
	mcpDigest := sha(dataJCS)
	agentBytes := []byte(`{"name":"Finance Agent","url":"https://agents.publisher.example/finance","version":"2.0.1"}`)
	f.artifacts[agentURL] = agentBytes
	agentDigest := sha(agentBytes)

	policy := strictjson.ObjectValue(strictjson.Member{Key: "privacyPolicyUrl", Val: strictjson.StringValue("https://publisher.example/privacy")})
	f.entries = []*entrySpec{
		{
			e:     Entry{Identifier: mcpID, Type: mcpType, Data: &data, Digest: mcpDigest, Publisher: &Publisher{Identifier: pubDID, DisplayName: "Publisher"}},
			extra: []strictjson.Member{{Key: "extensions", Val: strictjson.ObjectValue(strictjson.Member{Key: policyExt, Val: policy})}},
			manifests: []*manifestSpec{
				f.spec("release", Subject{Identifier: mcpID, Type: mcpType, Digest: mcpDigest}),
				f.spec("assessor", Subject{Identifier: mcpID, Type: mcpType, Digest: mcpDigest}),
			},
		},
		{
			e: Entry{Identifier: agentID, Type: A2ACardType, URL: agentURL, Digest: agentDigest},
			manifests: []*manifestSpec{
				f.spec("release", Subject{Identifier: agentID, Type: A2ACardType, Digest: agentDigest, URL: agentURL}),
			},
		},
	}
	// The assessor's manifest carries a member no schema knows; it stays
	// in the payload.
	f.entries[0].manifests[1].extra = []strictjson.Member{{Key: "x-fixture-note", Val: strictjson.StringValue("kept in the payload")}}
	f.entries[0].manifests[0].m.Provenance = []Provenance{{Relation: RelationPublishedFrom, SourceID: "https://github.com/publisher-example/demo"}}
	f.root = &manifestSpec{key: k["registry"], issued: fxIssued, expires: fxExpires, typ: TypCatalog}
	f.opts = Options{Now: func() time.Time { return fxNow }}
	return f
}

// spec is a manifest by the named key over subject, contributor = signer.
func (f *fixture) spec(keyName string, s Subject) *manifestSpec {
	k := f.keys[keyName]
	return &manifestSpec{key: k, m: Manifest{Contributor: k.DID, Subject: s}, issued: fxIssued, expires: fxExpires, typ: TypManifest}
}

// signSpec signs v as spec says.
func (f *fixture) signSpec(v strictjson.Value, s *manifestSpec) strictjson.Value {
	f.t.Helper()
	for _, m := range s.extra {
		v = v.With(m.Key, m.Val)
	}
	typ := s.typ
	if s.header != nil {
		// Sign refuses a foreign typ; the header hook sets the real one.
		typ = TypManifest
	}
	signed, err := Sign(context.Background(), v, typ, s.key, s.issued, s.expires)
	if err != nil {
		f.t.Fatal(err)
	}
	out := signed.Value
	if s.edit != nil {
		out = s.edit(out)
	}
	if s.header != nil || s.edit != nil {
		h := strictjson.ObjectValue(
			strictjson.Member{Key: "alg", Val: strictjson.StringValue("ES256")},
			strictjson.Member{Key: "kid", Val: strictjson.StringValue(s.key.KID())},
			strictjson.Member{Key: "typ", Val: strictjson.StringValue(s.typ)},
		)
		if s.header != nil {
			h = s.header(h)
		}
		out = resignHeader(f.t, out, s.key.Signer, h)
	}
	if s.post != nil {
		out = s.post(out)
	}
	return out
}

// resignHeader replaces v's JWS by one over the same payload under header.
func resignHeader(t testing.TB, v strictjson.Value, k crypto.Signer, header strictjson.Value) strictjson.Value {
	t.Helper()
	payload, err := Payload(v)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := header.JCS()
	if err != nil {
		t.Fatal(err)
	}
	prot := base64.RawURLEncoding.EncodeToString(hb)
	raw, err := jose.Sign(context.Background(), k, jose.ES256, []byte(prot+"."+base64.RawURLEncoding.EncodeToString(payload)))
	if err != nil {
		t.Fatal(err)
	}
	return setJWS(v, prot+".."+base64.RawURLEncoding.EncodeToString(raw))
}

// setJWS returns v with signature.jws set to jws.
func setJWS(v strictjson.Value, jws string) strictjson.Value {
	return setSig(v, "jws", strictjson.StringValue(jws))
}

// setSig returns v with signature member key set to val.
func setSig(v strictjson.Value, key string, val strictjson.Value) strictjson.Value {
	sig, _ := v.Get("signature")
	return v.With("signature", sig.With(key, val))
}

// catalog builds the catalog value: manifests signed first, then the root.
func (f *fixture) catalog() strictjson.Value {
	f.t.Helper()
	c := Catalog{Host: f.host}
	var entries []strictjson.Value
	for _, es := range f.entries {
		e := es.e
		e.TrustManifests = nil
		for _, ms := range es.manifests {
			e.TrustManifests = append(e.TrustManifests, f.signSpec(ms.m.Value(), ms))
		}
		v := e.Value()
		for _, m := range es.extra {
			v = v.With(m.Key, m.Val)
		}
		if es.post != nil {
			v = es.post(v)
		}
		entries = append(entries, v)
	}
	root := c.Value().With("entries", strictjson.ArrayValue(entries...))
	for _, m := range f.rootExtra {
		root = root.With(m.Key, m.Val)
	}
	if f.root != nil {
		root = f.signSpec(root, f.root)
	}
	if f.rootPost != nil {
		root = f.rootPost(root)
	}
	return root
}

// verify runs VerifyCatalog over the fixture with a map resolver and
// fetcher.
func (f *fixture) verify(data []byte) (*Report, error) {
	f.resolver = &mapResolver{docs: map[string][]byte{}, calls: map[string]int{}}
	for did, d := range f.docs {
		f.resolver.docs[did] = d.Compact()
	}
	for did, b := range f.rawDocs {
		f.resolver.docs[did] = b
	}
	opts := f.opts
	opts.Resolver = f.resolver
	if opts.Fetcher == nil {
		opts.Fetcher = mapFetcher(f.artifacts)
	}
	return VerifyCatalog(context.Background(), data, opts)
}

func (f *fixture) run() *Report {
	f.t.Helper()
	rep, err := f.verify(f.catalog().Compact())
	if err != nil {
		f.t.Fatalf("VerifyCatalog: %v", err)
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

// sameCodes compares reason codes as sets in order of appearance.
func sameCodes(got []Reason, want []string) bool {
	return slices.Equal(codes(got), want)
}

// reverseAll reverses the members of every object, which changes no signed
// payload (RFC 8785 sorts members).
func reverseAll(v strictjson.Value) strictjson.Value {
	switch v.Kind {
	case strictjson.Object:
		out := strictjson.Value{Kind: strictjson.Object}
		for i := len(v.Obj) - 1; i >= 0; i-- {
			m := v.Obj[i]
			m.Val = reverseAll(m.Val)
			out.Obj = append(out.Obj, m)
		}
		return out
	case strictjson.Array:
		out := strictjson.Value{Kind: strictjson.Array}
		for _, e := range v.Arr {
			out.Arr = append(out.Arr, reverseAll(e))
		}
		return out
	}
	return v
}

// reverseManifests reverses an entry's trustManifests (their order means
// nothing; the catalog signature, made after, covers the new order).
func reverseManifests(e strictjson.Value) strictjson.Value {
	tm, _ := e.Get("trustManifests")
	arr := slices.Clone(tm.Arr)
	slices.Reverse(arr)
	return e.With("trustManifests", strictjson.ArrayValue(arr...))
}
