package server

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/pgtest"
	"github.com/cardsign/cardsign/internal/testpki"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/registry/catalog"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/webtrust"
)

const catalogDomain = "agents.example.com"

// newCatalogAuthority is an authority on a fresh SQLite store publishing
// the AI Catalog of catalogDomain; configure changes its Config further.
func newCatalogAuthority(t *testing.T, configure func(*Config)) (*Authority, string) {
	t.Helper()
	dir := t.TempDir()
	a := newAuthorityWith(t, openStore(t, dir), dir, slog.New(slog.DiscardHandler), func(c *Config) {
		c.Catalog = catalog.Settings{Domain: catalogDomain, DisplayName: "Example Agents"}
		if configure != nil {
			configure(c)
		}
	})
	return a, dir
}

// publishedCatalog is newCatalogAuthority with agents alpha (registered
// by a GitHub pipeline) and beta (by a token) public, after a duty round,
// served over HTTP until the test ends.
func publishedCatalog(t *testing.T, configure func(*Config)) (*Authority, *httptest.Server) {
	t.Helper()
	a, _ := newCatalogAuthority(t, configure)
	registerAs(t, a, "alpha", store.Public, githubPipeline)
	registerAs(t, a, "beta", store.Public, nil)
	runDuties(t, a)
	srv := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{}))
	t.Cleanup(srv.Close)
	return a, srv
}

// githubPipeline is the provenance a GitHub Actions identity token gives.
var githubPipeline = map[string]string{
	"iss": "https://token.actions.githubusercontent.com", "sub": "repo:acme/payments:ref:refs/tags/v1.2.0",
	"repository": "acme/payments", "sha": "0123456789abcdef0123456789abcdef01234567",
	"job_workflow_ref": "acme/payments/.github/workflows/release.yml@refs/tags/v1.2.0",
}

// registerAs signs the security card, named after agent id (each agent's
// content its own), for agent id with vis, as a caller whose identity
// token gave prov (nil: a token caller).
func registerAs(t *testing.T, a *Authority, id string, vis store.Visibility, prov map[string]string) *Signed {
	t.Helper()
	card := bytes.Replace(registryCard(t), []byte(`"name": "Secure Agent"`), []byte(`"name": "Secure Agent `+id+`"`), 1)
	s, err := a.Sign(t.Context(), SignRequest{Card: card, Caller: "oidc:release", RequestID: "reg-" + id,
		Identity: access.Identity{Name: "oidc:release", Provenance: prov}, Registration: &Registration{AgentID: id, Visibility: vis}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fetch GETs path from srv with the given request headers.
func fetch(t *testing.T, srv *httptest.Server, method, path string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return httpDo(t, srv.Client(), req)
}

// publicKeyOf is the public key of kid among a's keys.
func publicKeyOf(t *testing.T, a *Authority, kid string) crypto.PublicKey {
	t.Helper()
	views, err := a.admin.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.KID == kid {
			pub, err := v.Public.PublicKey()
			if err != nil {
				t.Fatal(err)
			}
			return pub
		}
	}
	t.Fatalf("no key %s", kid)
	return nil
}

// checkSignature checks what cardsign puts in v's did-web-v1 signature,
// from the spec's rules and apart from aicatalog's verifier: the header is
// exactly {alg ES256, kid did:web:DOMAIN#kid, typ}, signer and profile,
// ES256 over protected.JCS(payload) with kid's public key. It returns the
// signature object's issuedAt and expiresAt and the payload (which the
// audit record's SHA-256 covers).
func checkSignature(t *testing.T, a *Authority, v strictjson.Value, typ, kid string) (issued, expires time.Time, payload []byte) {
	t.Helper()
	sig, _ := v.Get("signature")
	jws, _ := sig.Get("jws")
	parts := strings.Split(jws.Str, ".")
	if len(parts) != 3 || parts[1] != "" {
		t.Fatalf("jws %q is not a detached compact JWS", jws.Str)
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	var hdr map[string]any
	if err := json.Unmarshal(hb, &hdr); err != nil {
		t.Fatal(err)
	}
	did := aicatalog.DID(catalogDomain)
	if len(hdr) != 3 || hdr["alg"] != "ES256" || hdr["typ"] != typ || hdr["kid"] != did+"#"+kid {
		t.Fatalf("protected header %s, want alg ES256, typ %s, kid %s#%s", hb, typ, did, kid)
	}
	for k, want := range map[string]string{"signer": did, "profile": aicatalog.Profile} {
		if got, _ := sig.Get(k); got.Str != want {
			t.Fatalf("signature.%s = %q, want %q", k, got.Str, want)
		}
	}
	payload, err = aicatalog.Payload(v)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	input := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload)
	if err := jose.Verify(jose.ES256, publicKeyOf(t, a, kid), []byte(input), raw); err != nil {
		t.Fatalf("%s signature does not verify with %s: %v", typ, kid, err)
	}
	at := func(k string) time.Time {
		s, _ := sig.Get(k)
		tm, err := time.Parse(time.RFC3339, s.Str)
		if err != nil {
			t.Fatalf("signature.%s %q: %v", k, s.Str, err)
		}
		return tm
	}
	return at("issuedAt"), at("expiresAt"), payload
}

// servedCatalog is the catalog as served, checked: headers, every
// signature by kid, every digest against what the entry's URL serves.
type servedCatalog struct {
	body     []byte
	etag     string
	maxAge   int64
	doc      strictjson.Value
	ids      []string
	earliest time.Time
	issued   time.Time // the snapshot's
	releases map[string]strictjson.Value
	payloads [][]byte // manifests' then the snapshot's
}

func getCatalog(t *testing.T, a *Authority, srv *httptest.Server, kid string) servedCatalog {
	t.Helper()
	resp, body := fetch(t, srv, http.MethodGet, aicatalog.WellKnownPath)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("catalog: %d %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != aicatalog.MediaType {
		t.Fatalf("Content-Type %q", ct)
	}
	sc := servedCatalog{body: body, etag: resp.Header.Get("ETag"), releases: map[string]strictjson.Value{}}
	if sc.etag != jwks.ETagOf(body) {
		t.Fatalf("ETag %s is not the body's %s", sc.etag, jwks.ETagOf(body))
	}
	cc := resp.Header.Get("Cache-Control")
	n, err := strconv.ParseInt(strings.TrimPrefix(cc, "public, max-age="), 10, 64)
	if err != nil || !strings.HasPrefix(cc, "public, max-age=") {
		t.Fatalf("Cache-Control %q", cc)
	}
	sc.maxAge = n
	if sc.doc, err = strictjson.Parse(body, strictjson.Limits{}); err != nil {
		t.Fatal(err)
	}
	host, _ := sc.doc.Get("host")
	if id, _ := host.Get("identifier"); id.Str != aicatalog.DID(catalogDomain) {
		t.Fatalf("host %s", host.Compact())
	}
	entries, _ := sc.doc.Get("entries")
	for _, e := range entries.Arr {
		id, _ := e.Get("identifier")
		sc.ids = append(sc.ids, id.Str)
		digest, _ := e.Get("digest")
		if u, ok := e.Get("url"); ok {
			path := strings.TrimPrefix(u.Str, "https://"+catalogDomain)
			cresp, card := fetch(t, srv, http.MethodGet, path)
			sum := sha256.Sum256(card)
			if cresp.StatusCode != 200 || digest.Str != "sha256:"+hex.EncodeToString(sum[:]) {
				t.Fatalf("entry %s: digest %s, the card URL serves %d with sha256 %x", id.Str, digest.Str, cresp.StatusCode, sum)
			}
		} else {
			data, _ := e.Get("data")
			jcs, err := data.JCS()
			sum := sha256.Sum256(jcs)
			if err != nil || digest.Str != "sha256:"+hex.EncodeToString(sum[:]) {
				t.Fatalf("entry %s: digest %s, data's RFC 8785 sha256 %x (%v)", id.Str, digest.Str, sum, err)
			}
		}
		tms, _ := e.Get("trustManifests")
		if len(tms.Arr) != 1 {
			t.Fatalf("entry %s has %d manifests", id.Str, len(tms.Arr))
		}
		m := tms.Arr[0]
		subject, _ := m.Get("subject")
		if sid, _ := subject.Get("identifier"); sid.Str != id.Str {
			t.Fatalf("manifest subject %s for entry %s", subject.Compact(), id.Str)
		}
		if sd, _ := subject.Get("digest"); sd.Str != digest.Str {
			t.Fatalf("manifest subject %s for entry digest %s", subject.Compact(), digest.Str)
		}
		if c, _ := m.Get("contributor"); c.Str != aicatalog.DID(catalogDomain) {
			t.Fatalf("contributor %q", c.Str)
		}
		_, exp, payload := checkSignature(t, a, m, aicatalog.TypManifest, kid)
		sc.payloads = append(sc.payloads, payload)
		if sc.earliest.IsZero() || exp.Before(sc.earliest) {
			sc.earliest = exp
		}
		ext, _ := m.Get("extensions")
		sc.releases[id.Str], _ = ext.Get(catalog.ReleaseExtension)
	}
	issued, exp, payload := checkSignature(t, a, sc.doc, aicatalog.TypCatalog, kid)
	sc.payloads = append(sc.payloads, payload)
	sc.issued = issued
	if exp.Before(sc.earliest) || sc.earliest.IsZero() {
		sc.earliest = exp
	}
	if left := sc.earliest.Sub(a.now()); time.Duration(sc.maxAge)*time.Second > left || sc.maxAge > 3600 {
		t.Fatalf("max-age %d outlives the earliest expiresAt %s (in %s) or the JWKS's 3600", sc.maxAge, sc.earliest, left)
	}
	// And as any verifier does: the spec's whole procedure, the DID
	// document listing the published P-256 keys, the artifacts fetched.
	rep, err := aicatalog.VerifyCatalog(t.Context(), body, aicatalog.Options{Now: a.now, Resolver: didResolver{srv}, Fetcher: srvFetcher{srv}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Entries) != len(sc.ids) || rep.Catalog.Signer != aicatalog.DID(catalogDomain) {
		var why []string
		for _, e := range rep.Entries {
			why = append(why, fmt.Sprintf("%s: %v %v", e.Identifier, e.Accepted, e.Reasons))
		}
		t.Fatalf("VerifyCatalog: catalog %v %v; entries %s", rep.Catalog.Accepted, rep.Catalog.Reasons, strings.Join(why, "; "))
	}
	return sc
}

// catalogRecords are the audit records of catalog signatures after seq.
func catalogRecords(t *testing.T, a *Authority, after int64) []audit.Record {
	t.Helper()
	recs, err := a.store.ListAudit(t.Context(), after, 0)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(recs, func(r audit.Record) bool { return r.Caller != catalog.Caller })
}

func auditHead(t *testing.T, a *Authority) int64 {
	t.Helper()
	seq, _, err := a.store.AuditHead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// TestCatalogPublished: the catalog lists the public agents only, each
// entry's digest is the SHA-256 of the bytes its URL serves, every manifest
// and the snapshot verify under did:web with the active key, each manifest
// states the release and the pipeline's repository; each signature is an
// audit record and a log leaf; a round with no change signs nothing; the
// route answers 304, HEAD, and a Cache-Control within the expiry.
func TestCatalogPublished(t *testing.T) {
	a, _ := newCatalogAuthority(t, nil)
	ctx := t.Context()
	kid := activeKID(t, a)
	alpha := registerAs(t, a, "alpha", store.Public, githubPipeline)
	registerAs(t, a, "beta", store.Public, nil)
	registerAs(t, a, "secret", store.Private, githubPipeline)
	srv := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{}))
	defer srv.Close()

	start := auditHead(t, a)
	runDuties(t, a)
	sc := getCatalog(t, a, srv, kid)
	want := []string{"urn:air:" + catalogDomain + ":a2a:alpha", "urn:air:" + catalogDomain + ":a2a:beta"}
	if !slices.Equal(sc.ids, want) {
		t.Fatalf("entries %v, want %v (public agents only)", sc.ids, want)
	}
	rel := sc.releases[want[0]]
	for k, w := range map[string]string{"agentId": "alpha", "canonicalSha256": hex.EncodeToString(alpha.CanonicalSHA256[:]),
		"commit": githubPipeline["sha"], "workflow": githubPipeline["job_workflow_ref"], "issuer": githubPipeline["iss"]} {
		if got, _ := rel.Get(k); got.Str != w {
			t.Errorf("alpha's release %s = %q, want %q", k, got.Str, w)
		}
	}
	if v, _ := rel.Get("version"); v.Kind != strictjson.Number || v.Str != "1" {
		t.Errorf("alpha's release version %s, want the number 1", v.Compact())
	}
	if !bytes.Contains(sc.body, []byte(`"relation": "publishedFrom"`)) || !bytes.Contains(sc.body, []byte(`"sourceId": "https://github.com/acme/payments"`)) {
		t.Errorf("alpha's manifest has no publishedFrom provenance:\n%s", sc.body)
	}
	if b := sc.releases[want[1]]; b.Has("commit") || b.Has("issuer") {
		t.Errorf("beta, registered without OIDC, has pipeline claims: %s", b.Compact())
	}

	// One audit record per signature (two manifests, one snapshot), each a
	// leaf of the transparency log, each over the payload it signed.
	recs := catalogRecords(t, a, start)
	if len(recs) != 3 {
		t.Fatalf("%d catalog audit records, want 3", len(recs))
	}
	for i, r := range recs {
		sum := sha256.Sum256(sc.payloads[i])
		if r.KID != kid || r.Alg != "ES256" || r.Profile != catalog.Profile || !bytes.Equal(r.CanonicalSHA256, sum[:]) {
			t.Errorf("record %d: %+v, want kid %s, ES256, profile %s, sha256 of the payload", i, r, kid, catalog.Profile)
		}
		// The leaf is the entry audit verify --log rebuilds from the record;
		// a manifest's names the card and its hosts, so log monitor --watch
		// finds every release of a watched agent.
		entries, err := a.store.LogEntries(ctx, r.Seq-1, r.Seq)
		if err != nil || len(entries) != 1 || !bytes.Equal(entries[0], transparency.NewEntry(r, r.Hosts).Marshal()) || !bytes.Contains(entries[0], []byte(`"profile":"ai-catalog"`)) {
			t.Errorf("record %d's log leaf: %s, %v", r.Seq, entries, err)
			continue
		}
		e, err := transparency.ParseEntry(entries[0])
		if err != nil || e.Signature != r.Signature || (i < 2) != transparency.MatchesWatch(e, "secure.example.com") {
			t.Errorf("record %d's log leaf %s: %v", r.Seq, entries[0], err)
		}
	}
	if recs[0].CardName != "Secure Agent alpha" || recs[0].RequestID != "catalog.alpha.v1" || recs[2].RequestID != "catalog.snapshot" || recs[2].CardName != catalog.DocumentName {
		t.Errorf("records name %q/%q and %q/%q", recs[0].CardName, recs[0].RequestID, recs[2].CardName, recs[2].RequestID)
	}

	// Nothing changed: nothing signed, the same bytes.
	head := auditHead(t, a)
	runDuties(t, a)
	a.catalog.pub.Forget()
	runDuties(t, a)
	if after := auditHead(t, a); after != head {
		t.Fatalf("rounds with no change wrote %d audit records", after-head)
	}
	if again := getCatalog(t, a, srv, kid); !bytes.Equal(again.body, sc.body) {
		t.Fatal("the catalog changed with nothing to change it")
	}

	resp, body := fetch(t, srv, http.MethodGet, aicatalog.WellKnownPath, "If-None-Match", sc.etag)
	if resp.StatusCode != http.StatusNotModified || len(body) != 0 || resp.Header.Get("ETag") != sc.etag {
		t.Fatalf("If-None-Match: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = fetch(t, srv, http.MethodHead, aicatalog.WellKnownPath)
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Length") != strconv.Itoa(len(sc.body)) {
		t.Fatalf("HEAD: %d %q %v", resp.StatusCode, body, resp.Header)
	}

	// A new registration: one new manifest, the others reused.
	head = auditHead(t, a)
	registerAs(t, a, "gamma", store.Public, nil)
	runDuties(t, a)
	if recs := catalogRecords(t, a, head); len(recs) != 2 || recs[0].RequestID != "catalog.gamma.v1" {
		t.Fatalf("after one registration: %d catalog records %+v, want gamma's manifest and the snapshot", len(recs), recs)
	}
	if sc := getCatalog(t, a, srv, kid); len(sc.ids) != 3 {
		t.Fatalf("entries %v", sc.ids)
	}

	// beta made private, gamma removed: both leave.
	registerAs(t, a, "beta", store.Private, nil)
	if err := a.Agents().RemoveAgent(ctx, "gamma", "token:admin"); err != nil {
		t.Fatal(err)
	}
	runDuties(t, a)
	if sc := getCatalog(t, a, srv, kid); !slices.Equal(sc.ids, want[:1]) {
		t.Fatalf("after beta went private and gamma was removed: %v", sc.ids)
	}
}

// TestCatalogInline: with inline, entries carry the card as data, its
// digest the SHA-256 of its RFC 8785 form, and no url.
func TestCatalogInline(t *testing.T) {
	a, _ := newCatalogAuthority(t, func(c *Config) { c.Catalog.Inline = true })
	registerAs(t, a, "alpha", store.Public, nil)
	runDuties(t, a)
	srv := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{}))
	defer srv.Close()
	sc := getCatalog(t, a, srv, activeKID(t, a))
	entries, _ := sc.doc.Get("entries")
	if len(entries.Arr) != 1 || entries.Arr[0].Has("url") || !entries.Arr[0].Has("data") {
		t.Fatalf("inline entries: %s", entries.Compact())
	}
}

// TestCatalogRevokedCard: a card revoked leaves the catalog at once (the
// stored catalog listing it is not served; the next round drops it), and
// the revocation document lists it by the canonical SHA-256 the manifest
// stated (dev.cardsign.release.canonicalSha256).
func TestCatalogRevokedCard(t *testing.T) {
	a, srv := publishedCatalog(t, nil)
	kid := activeKID(t, a)
	before := getCatalog(t, a, srv, kid)
	stated, _ := before.releases["urn:air:"+catalogDomain+":a2a:alpha"].Get("canonicalSha256")

	if _, err := a.Agents().RevokeAgentCard(t.Context(), "alpha", 0, "key material in the card", "token:admin"); err != nil {
		t.Fatal(err)
	}
	if resp, body := fetch(t, srv, http.MethodGet, aicatalog.WellKnownPath); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the stored catalog listing a revoked card: %d %s, want 503 with Retry-After", resp.StatusCode, body)
	}
	runDuties(t, a)
	after := getCatalog(t, a, srv, kid)
	if !slices.Equal(after.ids, []string{"urn:air:" + catalogDomain + ":a2a:beta"}) {
		t.Fatalf("after the revocation: %v", after.ids)
	}
	_, doc := verifiedRevocations(t, a)
	if len(doc.Cards) != 1 || hex.EncodeToString(doc.Cards[0].CanonicalSHA256) != stated.Str {
		t.Fatalf("the revocation document lists %+v; the manifest stated canonicalSha256 %s", doc.Cards, stated.Str)
	}
}

// TestCatalogKeyEvents: the catalog follows the signing key (rotation:
// the cards re-signed, so their manifests; activation: every signature
// made again by the new key), is never served signed by a revoked key
// (503 until a key is active and signs it again), and
// is signed again before it expires (manual clock), the Cache-Control never
// reaching past the earliest expiresAt.
func TestCatalogKeyEvents(t *testing.T) {
	// registry.keep 1: the registration's version is gone once the registry
	// signs it again; its pipeline comes from the stored catalog then.
	a, srv := publishedCatalog(t, func(c *Config) { c.Lifetime, c.RegistryKeep = 2*time.Hour, 1 })
	ctx := t.Context()
	advance := manualClock(a)
	k1 := activeKID(t, a)
	first := getCatalog(t, a, srv, k1)
	if d := first.earliest.Sub(first.issued); d != 2*time.Hour {
		t.Fatalf("expiresAt - issuedAt = %s, want signing.lifetime 2h", d)
	}

	// Rotation: the cards carry k1 and k2 now, new bytes: new manifests.
	k2 := pendingKey(t, a)
	runDuties(t, a)
	rotated := getCatalog(t, a, srv, k1)
	if rotated.etag == first.etag {
		t.Fatal("the catalog did not follow the cards re-signed for the rotation")
	}
	// The registry's re-signature keeps the pipeline that registered it.
	if h, _ := a.registry.History(ctx, "alpha"); len(h) != 1 {
		t.Fatalf("alpha's history holds %d versions with registry.keep 1", len(h))
	}
	rel := rotated.releases["urn:air:"+catalogDomain+":a2a:alpha"]
	if v, _ := rel.Get("version"); v.Str != "2" {
		t.Fatalf("alpha re-signed for the rotation: release %s, want version 2", rel.Compact())
	}
	if c, _ := rel.Get("commit"); c.Str != githubPipeline["sha"] || !bytes.Contains(rotated.body, []byte("https://github.com/acme/payments")) {
		t.Fatalf("alpha re-signed by the registry lost its pipeline: %s", rel.Compact())
	}
	// Activation: every signature by k2.
	if _, err := a.admin.ActivateKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	head := auditHead(t, a)
	runDuties(t, a)
	getCatalog(t, a, srv, k2)
	if recs := catalogRecords(t, a, head); len(recs) != 3 {
		t.Fatalf("activation: %d catalog signatures, want 3", len(recs))
	}

	// Half the lifetime later: signed again before it expires.
	advance(61 * time.Minute)
	head = auditHead(t, a)
	runDuties(t, a)
	later := getCatalog(t, a, srv, k2)
	if recs := catalogRecords(t, a, head); len(recs) != 3 || !later.issued.After(first.issued.Add(time.Hour)) {
		t.Fatalf("half a lifetime on: %d signatures, issuedAt %s", len(recs), later.issued)
	}
	advance(30 * time.Minute)
	if sc := getCatalog(t, a, srv, k2); sc.maxAge > int64(later.earliest.Sub(a.now())/time.Second) {
		t.Fatalf("max-age %d outlives expiresAt %s", sc.maxAge, later.earliest)
	}

	// k2 revoked, k3 pending (ES256): never served with k2's signatures.
	hour := time.Hour
	k3, err := a.admin.RotateKey(ctx, "", &hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.RevokeKey(ctx, k2, "compromised in a test", true); err != nil {
		t.Fatal(err)
	}
	if resp, body := fetch(t, srv, http.MethodGet, aicatalog.WellKnownPath); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a catalog signed by a revoked key: %d %s", resp.StatusCode, body)
	}
	if err := a.dutyRound(ctx); err != nil && !strings.Contains(err.Error(), "agent") {
		t.Fatal(err)
	}
	// No key is active: nothing signs (jwks.Signing), the catalog neither.
	if resp, body := fetch(t, srv, http.MethodGet, aicatalog.WellKnownPath); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("no active key: %d %s", resp.StatusCode, body)
	}
	if _, err := a.admin.ActivateKey(ctx, k3.KID); err != nil {
		t.Fatal(err)
	}
	runDuties(t, a)
	getCatalog(t, a, srv, k3.KID)
}

// TestCatalogReplicas: two authorities over one store serve identical
// bytes and ETag; the one without the lease signs nothing. With PostgreSQL
// stopped, the last catalog read is served still (within its validity).
func TestCatalogReplicas(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		testCatalogReplicas(t, openStore(t, dir), dir, nil)
	})
	t.Run("postgres", func(t *testing.T) {
		c, st := ownPostgres(t)
		testCatalogReplicas(t, st, t.TempDir(), c)
	})
}

func testCatalogReplicas(t *testing.T, st store.Store, dir string, pg *pgtest.Cluster) {
	a := newAuthorityWith(t, st, dir, slog.New(slog.DiscardHandler), func(c *Config) {
		c.Catalog = catalog.Settings{Domain: catalogDomain}
	})
	awaitActive(t, a)
	cfg := a.cfg
	cfg.Replica, cfg.Metrics = "b", nil
	b := NewAuthority(cfg, st, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { b.Close() })
	if created, err := b.Bootstrap(t.Context()); err != nil || created {
		t.Fatalf("Bootstrap of a replica: %v %v", created, err)
	}
	registerAs(t, a, "alpha", store.Public, nil)
	runDuties(t, a)
	head := auditHead(t, b)
	runDuties(t, b)
	if after := auditHead(t, b); after != head {
		t.Fatalf("the replica without the lease signed %d records", after-head)
	}
	sa := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{}))
	defer sa.Close()
	sb := httptest.NewServer(NewHTTPHandler(b, HTTPOptions{}))
	defer sb.Close()
	kid := activeKID(t, a)
	ca, cb := getCatalog(t, a, sa, kid), getCatalog(t, b, sb, kid)
	if !bytes.Equal(ca.body, cb.body) || ca.etag != cb.etag {
		t.Fatalf("replicas serve different catalogs: %s vs %s", ca.etag, cb.etag)
	}
	// A registration on the replica without the lease: the holder, told of
	// nothing, sees it at its next round (the audit head moved).
	registerAs(t, b, "beta", store.Public, nil)
	runDuties(t, a)
	b.catalog.pub.Forget()
	ca, cb = getCatalog(t, a, sa, kid), getCatalog(t, b, sb, kid)
	if len(ca.ids) != 2 || !bytes.Equal(ca.body, cb.body) {
		t.Fatalf("after a registration on the other replica: %v and %v", ca.ids, cb.ids)
	}
	if pg == nil {
		return
	}
	if err := pg.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.catalog.pub.Forget() // due for a read now
	resp, body := fetch(t, sb, http.MethodGet, aicatalog.WellKnownPath)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, cb.body) || resp.Header.Get("ETag") != cb.etag {
		t.Fatalf("with the database stopped: %d %s", resp.StatusCode, body)
	}
}

// TestCatalogUnavailable: 404 when the catalog is off; 503 with
// Retry-After while it is first being made, and when no ES256 key can sign
// (the signer gauge says so).
func TestCatalogUnavailable(t *testing.T) {
	off, _ := newAuthority(t)
	srv := httptest.NewServer(NewHTTPHandler(off, HTTPOptions{}))
	defer srv.Close()
	if resp, body := fetch(t, srv, http.MethodGet, aicatalog.WellKnownPath); resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "catalog.domain") {
		t.Fatalf("catalog off: %d %s", resp.StatusCode, body)
	}

	a, _ := newCatalogAuthority(t, nil)
	s2 := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{}))
	defer s2.Close()
	if resp, _ := fetch(t, s2, http.MethodGet, aicatalog.WellKnownPath); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("before the first round: %d %v", resp.StatusCode, resp.Header)
	}

	rsa, _ := newCatalogAuthority(t, func(c *Config) { c.DefaultAlg = jose.RS256 })
	registerAs(t, rsa, "alpha", store.Public, nil)
	runDuties(t, rsa) // no ES256 key is not a failed round
	s3 := httptest.NewServer(NewHTTPHandler(rsa, HTTPOptions{}))
	defer s3.Close()
	resp, body := fetch(t, s3, http.MethodGet, aicatalog.WellKnownPath)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "60" || !strings.Contains(string(body), "ES256") {
		t.Fatalf("no ES256 key: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	_, metrics := fetch(t, s3, http.MethodGet, "/metrics")
	if !strings.Contains(string(metrics), "cardsign_catalog_signer 0") {
		t.Fatalf("metrics do not say no key signs the catalog")
	}
}

// TestCatalogSignFailsRetried: a round that cannot sign (the key file is
// gone) stores nothing and fails; the next round, the key back, signs the
// change then, not at the next full pass.
func TestCatalogSignFailsRetried(t *testing.T) {
	a, dir := newCatalogAuthority(t, nil)
	registerAs(t, a, "alpha", store.Public, nil)
	runDuties(t, a)
	registerAs(t, a, "beta", store.Public, nil)
	keys, err := filepath.Glob(filepath.Join(dir, "keys", "*"))
	if err != nil || len(keys) == 0 {
		t.Fatalf("key files: %v %v", keys, err)
	}
	for _, k := range keys {
		if err := os.Rename(k, k+".away"); err != nil {
			t.Fatal(err)
		}
	}
	a.keys.forget()
	if err := a.dutyRound(t.Context()); err == nil || !strings.Contains(err.Error(), "AI Catalog") {
		t.Fatalf("a round whose key cannot be opened: %v", err)
	}
	for _, k := range keys {
		if err := os.Rename(k+".away", k); err != nil {
			t.Fatal(err)
		}
	}
	runDuties(t, a)
	srv := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{}))
	defer srv.Close()
	if sc := getCatalog(t, a, srv, activeKID(t, a)); len(sc.ids) != 2 {
		t.Fatalf("after the key came back: %v", sc.ids)
	}
}

// didResolver resolves the catalog's DID from the authority's own
// /.well-known/did.json (the published P-256 keys).
type didResolver struct{ srv *httptest.Server }

func (r didResolver) ResolveDID(ctx context.Context, did string) ([]byte, error) {
	if did != aicatalog.DID(catalogDomain) {
		return nil, fmt.Errorf("no DID document for %q", did)
	}
	return srvFetcher(r).FetchArtifact(ctx, "https://"+catalogDomain+aicatalog.DIDPath)
}

// srvFetcher fetches an entry's https://DOMAIN/... URL from the test server.
type srvFetcher struct{ srv *httptest.Server }

func (f srvFetcher) FetchArtifact(ctx context.Context, url string) ([]byte, error) {
	path, ok := strings.CutPrefix(url, "https://"+catalogDomain)
	if !ok {
		return nil, fmt.Errorf("not on %s: %q", catalogDomain, url)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// TestCatalogVerifiedFromURL: the catalog verifies from its URL as an A2A
// client in Go does (webtrust: HTTPS to the organisation's domain, did:web
// resolved at the authority's own https://DOMAIN/.well-known/did.json,
// every artifact fetched, the revocation document under a trust policy).
// Once a card is revoked,
// the catalog served no longer lists it, and a copy cached from before is
// refused for it (entry-revoked): the revocation document lists the
// canonicalSha256 its manifest states.
func TestCatalogVerifiedFromURL(t *testing.T) {
	a, _ := newCatalogAuthority(t, nil)
	registerAs(t, a, "alpha", store.Public, githubPipeline)
	registerAs(t, a, "beta", store.Public, nil)
	runDuties(t, a)

	ca := testpki.NewCA(t, "catalog test CA")
	certPEM, keyPEM := ca.Issue(t, testpki.Leaf{CommonName: catalogDomain, DNSNames: []string{catalogDomain}, Server: true})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(NewHTTPHandler(a, HTTPOptions{}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	base := "https://" + catalogDomain
	policy, err := webtrust.ParsePolicy("trust.yaml", []byte("rules:\n  - host: "+catalogDomain+
		"\n    did: "+aicatalog.DID(catalogDomain)+"\n    revocations: "+base+jwks.RevocationsPath+
		"\n    catalog_signer: "+aicatalog.DID(catalogDomain)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	newClient := func() *webtrust.Client {
		c, err := webtrust.New(webtrust.Options{Policy: policy, RootCAs: roots, Now: a.now,
			Resolve: []string{catalogDomain + ":443:" + srv.Listener.Addr().String()}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	verify := func(c *webtrust.Client, step string) *webtrust.CatalogReport {
		t.Helper()
		rep, err := c.VerifyCatalog(t.Context(), base+aicatalog.WellKnownPath)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return rep
	}
	first := newClient()
	rep := verify(first, "two agents")
	if !rep.OK() || len(rep.Entries) != 2 || rep.Releases[0].AgentID != "alpha" || !rep.Releases[0].HasVersion || rep.Releases[0].Version != 1 {
		t.Fatalf("two agents: catalog %v %v, entries %+v, releases %+v", rep.Catalog.Accepted, rep.Catalog.Reasons, rep.Entries, rep.Releases)
	}

	if _, err := a.Agents().RevokeAgentCard(t.Context(), "alpha", 0, "key material in the card", "token:admin"); err != nil {
		t.Fatal(err)
	}
	runDuties(t, a)
	// The first client holds the catalog from before (cached within its
	// max-age), but revalidates the revocation document: alpha refused.
	old := verify(first, "the cached copy")
	var codes []string
	for _, r := range old.Entries[0].Reasons {
		codes = append(codes, r.Code)
	}
	if old.Entries[0].Accepted || !slices.Contains(codes, webtrust.ReasonEntryRevoked) || !old.Entries[1].Accepted {
		t.Fatalf("the cached copy: alpha %v %v, beta %v", old.Entries[0].Accepted, old.Entries[0].Reasons, old.Entries[1].Accepted)
	}
	// A client fetching now gets the catalog without it.
	if rep := verify(newClient(), "alpha revoked"); !rep.OK() || len(rep.Entries) != 1 || rep.Entries[0].Identifier != "urn:air:"+catalogDomain+":a2a:beta" {
		t.Fatalf("after the revocation: %+v", rep.Entries)
	}
}
