package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/registry/catalog"
	"github.com/cardsign/cardsign/strictjson"
)

// withCatalog turns the catalog on for did:web:example.com.
func withCatalog(c *Config) {
	c.Catalog = catalog.Settings{Domain: "example.com", Namespace: "a2a", DisplayName: "Example", PublisherName: "Example", BaseURL: "https://example.com"}
}

// didMethod is one verification method of a served DID document.
type didMethod struct {
	id, controller string
	jwk            map[string]string // every member of publicKeyJwk
}

// parseDID reads a served DID document strictly and checks its frame: the
// id, the contexts, every method in assertionMethod and nothing else there.
// It returns the methods by fragment.
func parseDID(t *testing.T, body []byte) map[string]didMethod {
	t.Helper()
	doc, err := strictjson.Parse(body, strictjson.Limits{})
	if err != nil {
		t.Fatalf("DID document: %v\n%s", err, body)
	}
	keys := func(v strictjson.Value) []string {
		var out []string
		for _, m := range v.Obj {
			out = append(out, m.Key)
		}
		return out
	}
	if got := keys(doc); !slices.Equal(got, []string{"@context", "assertionMethod", "id", "verificationMethod"}) {
		t.Fatalf("DID document members %v (RFC 8785 order)", got)
	}
	if id, _, _ := doc.GetString("id"); id != "did:web:example.com" {
		t.Fatalf("DID document id %q", id)
	}
	methods := map[string]didMethod{}
	vms, _ := doc.Get("verificationMethod")
	for _, vm := range vms.Arr {
		id, _, _ := vm.GetString("id")
		ctl, _, _ := vm.GetString("controller")
		typ, _, _ := vm.GetString("type")
		frag, ok := strings.CutPrefix(id, "did:web:example.com#")
		if !ok || ctl != "did:web:example.com" || typ != "JsonWebKey2020" {
			t.Fatalf("verification method %q controller %q type %q", id, ctl, typ)
		}
		jwkVal, _ := vm.Get("publicKeyJwk")
		jwk := map[string]string{}
		for _, m := range jwkVal.Obj {
			jwk[m.Key] = m.Val.Str
		}
		methods[frag] = didMethod{id: id, controller: ctl, jwk: jwk}
	}
	am, _ := doc.Get("assertionMethod")
	var asserted []string
	for _, v := range am.Arr {
		asserted = append(asserted, v.Str)
	}
	var ids []string
	for _, m := range methods {
		ids = append(ids, m.id)
	}
	slices.Sort(ids)
	if !slices.Equal(asserted, ids) || len(ids) != len(vms.Arr) {
		t.Fatalf("assertionMethod %v, verification methods %v", asserted, ids)
	}
	return methods
}

// jwksKeys returns the served JWKS's keys by kid: alg, x and y.
func jwksKeys(t *testing.T, h http.Handler) map[string][3]string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, jwks.JWKSPath, nil))
	set, err := jwks.Parse(rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][3]string{}
	for _, k := range set.Keys {
		out[k.Kid] = [3]string{k.Alg, k.X, k.Y}
	}
	return out
}

// TestDIDDocument: did.json lists the published P-256 keys, public members
// only, the same x and y as the JWKS, a pending key before it signs, a
// revoked one gone at the next request, RSA and Ed25519 keys never, nor a
// key whose kid cannot be a fragment; it is served like the JWKS (media
// type, CORS, ETag, 304, HEAD, a max-age no longer than the JWKS's) and
// counted by document.
func TestDIDDocument(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	a := newAuthorityWith(t, openStore(t, dir), dir, slog.New(slog.DiscardHandler), withCatalog)
	h := NewHTTPHandler(a, HTTPOptions{})
	get := func(method string, hdr ...string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(method, aicatalog.DIDPath, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	listed := func() map[string]didMethod {
		t.Helper()
		rec := get(http.MethodGet)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", aicatalog.DIDPath, rec.Code, rec.Body)
		}
		methods := parseDID(t, rec.Body.Bytes())
		published := jwksKeys(t, h)
		// The verifier's own reading: each method authorizes its key.
		parsed, err := aicatalog.ParseDIDDocument(rec.Body.Bytes(), strictjson.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := parsed.AssertionKeys(); err != nil || len(got) != len(methods) {
			t.Fatalf("the verifier reads %d assertion keys (%v), the document lists %d methods", len(got), err, len(methods))
		}
		for kid := range methods {
			if _, err := parsed.SelectKey(aicatalog.KID("did:web:example.com", kid), "did:web:example.com"); err != nil {
				t.Fatalf("the verifier refuses key %s: %v", kid, err)
			}
		}
		for kid, m := range methods {
			if got := slices.Sorted(maps.Keys(m.jwk)); !slices.Equal(got, []string{"alg", "crv", "kty", "use", "x", "y"}) {
				t.Fatalf("key %s: publicKeyJwk members %v: public members only", kid, got)
			}
			k, ok := published[kid]
			if !ok || k != [3]string{"ES256", m.jwk["x"], m.jwk["y"]} || m.jwk["crv"] != "P-256" || m.jwk["kty"] != "EC" {
				t.Fatalf("key %s in the DID document %v is not the JWKS's %v", kid, m.jwk, k)
			}
		}
		return methods
	}

	first := activeView(t, a).KID
	if got := slices.Sorted(maps.Keys(listed())); !slices.Equal(got, []string{first}) {
		t.Fatalf("listed %v, want the first key %s", got, first)
	}
	// Served like the JWKS.
	rec := get(http.MethodGet)
	jrec := httptest.NewRecorder()
	h.ServeHTTP(jrec, httptest.NewRequest(http.MethodGet, jwks.JWKSPath, nil))
	for name, want := range map[string]string{"Content-Type": DIDMediaType, "Access-Control-Allow-Origin": "*", "X-Content-Type-Options": "nosniff"} {
		if got := rec.Header().Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if got, jw := maxAgeOf(t, rec), maxAgeOf(t, jrec); got > jw || got <= 0 {
		t.Errorf("max-age %s, JWKS's %s: no longer than the JWKS's", got, jw)
	}
	etag := rec.Header().Get("Etag")
	if etag != jwks.ETagOf(rec.Body.Bytes()) {
		t.Fatalf("ETag %q is not the body's", etag)
	}
	if r := get(http.MethodGet, "If-None-Match", `"other", `+etag); r.Code != http.StatusNotModified || r.Body.Len() != 0 || r.Header().Get("Etag") != etag {
		t.Fatalf("If-None-Match: %d %q", r.Code, r.Body)
	}
	if r := get(http.MethodHead); r.Code != http.StatusOK || r.Body.Len() != 0 || r.Header().Get("Content-Length") != strconv.Itoa(rec.Body.Len()) {
		t.Fatalf("HEAD: %d %d bytes, Content-Length %q", r.Code, r.Body.Len(), r.Header().Get("Content-Length"))
	}
	if r := get(http.MethodPost); r.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", r.Code)
	}

	// A pending key is listed before it signs; RSA and Ed25519 keys never.
	pending := pendingKey(t, a)
	rsa, err := a.admin.CreateKey(ctx, "RS256")
	if err != nil {
		t.Fatal(err)
	}
	ed, err := a.admin.CreateKey(ctx, "EdDSA")
	if err != nil {
		t.Fatal(err)
	}
	// A P-256 key whose kid cannot be a DID URL fragment under the profile.
	colon, err := a.admin.ImportKey(ctx, "file:"+writeKeyFile(t, dir), "ES256", "org:signing-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, kid := range []string{rsa.KID, ed.KID, colon.KID} {
		if _, ok := jwksKeys(t, h)[kid]; !ok {
			t.Fatalf("the key %s is not in the JWKS", kid)
		}
	}
	if got, want := slices.Sorted(maps.Keys(listed())), slices.Sorted(slices.Values([]string{first, pending})); !slices.Equal(got, want) {
		t.Fatalf("with a pending ES256 key, RSA %s and Ed25519 %s keys and %s: listed %v, want %v", rsa.KID, ed.KID, colon.KID, got, want)
	}
	if r := get(http.MethodGet, "If-None-Match", etag); r.Code != http.StatusOK {
		t.Fatalf("the old ETag after the key set changed: %d", r.Code)
	}
	// A revoked key is gone at the next request.
	if _, err := a.admin.RevokeKey(ctx, pending, "superseded", false); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(listed())); !slices.Equal(got, []string{first}) {
		t.Fatalf("after revoking %s: listed %v", pending, got)
	}
	if got := documentRequests(t, a.metrics, "did", "304"); got != 1 {
		t.Fatalf("did 304s counted %v, want 1", got)
	}
	if got := documentRequests(t, a.metrics, "did", "200"); got < 5 {
		t.Fatalf("did 200s counted %v, want the 5 or more served", got)
	}
}

// TestDIDDocumentOff: without a catalog, did.json is a 404 with a JSON
// error, whatever the keys.
func TestDIDDocumentOff(t *testing.T) {
	a, _ := newAuthority(t)
	rec := httptest.NewRecorder()
	NewHTTPHandler(a, HTTPOptions{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, aicatalog.DIDPath, nil))
	if rec.Code != http.StatusNotFound || rec.Header().Get("Content-Type") != "application/json" || !strings.Contains(rec.Body.String(), "catalog.domain is not set") {
		t.Fatalf("did.json with the catalog off: %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}

// TestDIDDocumentReplicas: two authorities over one store serve the same
// bytes and ETag, before and after a rotation made through one of them.
func TestDIDDocumentReplicas(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	one := newAuthorityWith(t, st, dir, slog.New(slog.DiscardHandler), withCatalog)
	two := newAuthorityUnstarted(t, st, dir, slog.New(slog.DiscardHandler), withCatalog)
	h1, h2 := NewHTTPHandler(one, HTTPOptions{}), NewHTTPHandler(two, HTTPOptions{})
	same := func(when string) {
		t.Helper()
		r1, r2 := httptest.NewRecorder(), httptest.NewRecorder()
		h1.ServeHTTP(r1, httptest.NewRequest(http.MethodGet, aicatalog.DIDPath, nil))
		h2.ServeHTTP(r2, httptest.NewRequest(http.MethodGet, aicatalog.DIDPath, nil))
		if r1.Code != http.StatusOK || !bytes.Equal(r1.Body.Bytes(), r2.Body.Bytes()) || r1.Header().Get("Etag") != r2.Header().Get("Etag") {
			t.Fatalf("%s: the replicas differ: %d %s %s\n%d %s %s", when, r1.Code, r1.Header().Get("Etag"), r1.Body, r2.Code, r2.Header().Get("Etag"), r2.Body)
		}
	}
	same("first key")
	pendingKey(t, one)
	two.keys.invalidate() // as the change notification would
	same("after a rotation")
}

// TestDIDDocumentServedWhileStoreDown: with PostgreSQL stopped, did.json
// is served from the last read, the same bytes, and /readyz/documents says
// so.
func TestDIDDocumentServedWhileStoreDown(t *testing.T) {
	c, st := ownPostgres(t)
	dir := t.TempDir()
	a := newAuthorityWith(t, st, dir, slog.New(slog.DiscardHandler), withCatalog)
	h := NewHTTPHandler(a, HTTPOptions{})
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	up := get(aicatalog.DIDPath)
	if rev := get(jwks.RevocationsPath); up.Code != http.StatusOK || rev.Code != http.StatusOK {
		t.Fatalf("did.json and the revocation document with the database up: %d %s, %d", up.Code, up.Body, rev.Code)
	}
	if err := c.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.keys.invalidate()
	rec := get(aicatalog.DIDPath)
	if rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), up.Body.Bytes()) || rec.Header().Get("Etag") != up.Header().Get("Etag") {
		t.Fatalf("did.json with the database stopped: %d %s", rec.Code, rec.Body)
	}
	if got := maxAgeOf(t, rec); got > time.Hour {
		t.Fatalf("max-age %s from the last read: longer than the JWKS's", got)
	}
	var ready struct {
		DID struct{ State string } `json:"did"`
	}
	if rec := get(DocumentsReadyPath); rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &ready) != nil || ready.DID.State != "last read" {
		t.Fatalf("%s with the database stopped: %d %s", DocumentsReadyPath, rec.Code, rec.Body)
	}
}

// maxAgeOf is a response's Cache-Control max-age.
func maxAgeOf(t *testing.T, rec *httptest.ResponseRecorder) time.Duration {
	t.Helper()
	v, ok := strings.CutPrefix(rec.Header().Get("Cache-Control"), "public, max-age=")
	n, err := strconv.Atoi(v)
	if !ok || err != nil {
		t.Fatalf("Cache-Control %q", rec.Header().Get("Cache-Control"))
	}
	return time.Duration(n) * time.Second
}

// documentRequests reads cardsign_jwks_requests_total{document, code}.
func documentRequests(t *testing.T, m *Metrics, document, code string) float64 {
	t.Helper()
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "cardsign_jwks_requests_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["document"] == document && labels["code"] == code {
				return metric.GetCounter().GetValue()
			}
		}
	}
	return 0
}
