package main

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/oidctest"
	"github.com/cardsign/cardsign/internal/testpki"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// TestCatalogEndToEnd is the organisation's AI Catalog as a new user meets
// it: two release pipelines, each with its GitHub Actions identity token,
// register their agents; cardsignd publishes https://catalog.example's
// /.well-known/ai-catalog.json and did.json behind a TLS front (the
// organisation's web server), and cardsign catalog verify checks them from
// the URL at each step: after a key rotation, after a card revocation, and
// on a copy kept until its signatures expired or a newer release replaced
// it. cardsign verify https://HOST checks an agent's own card against a
// trust policy that names did:web:catalog.example.
func TestCatalogEndToEnd(t *testing.T) {
	is := oidctest.New(t)
	dir := t.TempDir()
	ops := "ops-" + strings.Repeat("7", 40)
	d := runDaemon(t, daemonBin, filepath.Join(dir, "data"), fmt.Sprintf(`limits:
  rate: 0
keys:
  default_alg: ES256
catalog:
  domain: catalog.example
  display_name: Acme agents
auth:
  tokens:
    - name: ops
      sha256: %s
      roles: [admin, auditor]
`, sha256Hex(ops))+acmeOIDC(is, "signer"))
	opsToken := testsupport.WriteFileMode(t, filepath.Join(dir, "ops.token"), ops, 0o600)
	admin := func(args ...string) result {
		t.Helper()
		return mustRun(t, dir, append(args, "--server", d.grpc, "--token-file", opsToken)...)
	}

	// The organisation's web server: TLS for catalog.example (and the agent
	// host payments.example, which serves its own card at the A2A
	// well-known path), everything proxied to cardsignd's HTTP listener.
	ca := testpki.NewCA(t, "e2e root")
	certPEM, keyPEM := ca.Issue(t, testpki.Leaf{CommonName: "catalog.example", DNSNames: []string{"catalog.example", "payments.example"}, Server: true})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: d.http})
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "payments.example" && r.URL.Path == "/.well-known/agent-card.json" {
			r.URL.Path = "/agents/payments/agent-card.json"
		}
		proxy.ServeHTTP(w, r)
	}))
	front.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	front.StartTLS()
	t.Cleanup(front.Close)
	caFile := filepath.Join(dir, "ca.pem")
	writeFile(t, caFile, ca.CertPEM)
	frontAddr := front.Listener.Addr().String()
	web := []string{"--ca-file", caFile, "--resolve", "catalog.example:443:" + frontAddr, "--resolve", "payments.example:443:" + frontAddr}
	const catalogURL = "https://catalog.example/.well-known/ai-catalog.json"
	verifyCatalog := func(args ...string) result {
		t.Helper()
		return cardsign(t, dir, nil, append(append([]string{"catalog", "verify"}, web...), args...)...)
	}
	get := func(path string) []byte {
		t.Helper()
		resp, err := http.Get("http://" + d.http + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	didKeys := func() []string {
		var doc struct {
			AssertionMethod []string `json:"assertionMethod"`
		}
		if err := json.Unmarshal(get("/.well-known/did.json"), &doc); err != nil {
			t.Fatal(err)
		}
		return doc.AssertionMethod
	}
	// entries waits until the served catalog lists want (agent ids, in
	// order) and verifies from its URL, and returns it.
	entries := func(want ...string) []byte {
		t.Helper()
		var last result
		testsupport.WaitFor(t, "the catalog to list "+strings.Join(want, ", "), 30*time.Second, func() bool {
			last = verifyCatalog(catalogURL)
			lines := strings.Split(strings.TrimSpace(last.Stdout), "\n")
			if last.Code != 0 || len(lines) != len(want)+1 {
				return false
			}
			for i, id := range want {
				if !strings.HasPrefix(lines[i+1], fmt.Sprintf("entry[%d] urn:air:catalog.example:a2a:%s: accepted (signer did:web:catalog.example", i, id)) {
					return false
				}
			}
			return strings.HasPrefix(lines[0], "catalog "+catalogURL+": accepted (signer did:web:catalog.example")
		})
		return get("/.well-known/ai-catalog.json")
	}

	// Two pipelines of acme release their agents.
	clearConnEnv(t)
	clearIDTokenEnv(t)
	for k, v := range is.ActionsEnv() {
		t.Setenv(k, v)
	}
	t.Setenv("SSL_CERT_FILE", is.CAFile)
	t.Setenv(idTokenAudienceEnv, "cardsign")
	paymentsFile := filepath.Join(dir, "payments.json")
	writeFile(t, paymentsFile, []byte(paymentsCard))
	mustRun(t, dir, "sign", "--register", "--agent", "payments", "--visibility", "public", "--server", d.grpc, paymentsFile)
	billing := oidctest.GitHubClaims("")
	billing["repository"], billing["sub"], billing["sha"] = "acme/billing", "repo:acme/billing:ref:refs/tags/v3.0.0", strings.Repeat("b", 40)
	is.SetActionsClaims(billing)
	mustRun(t, dir, "sign", "--register", "--agent", "billing", "--visibility", "public", "--server", d.grpc, filepath.Join(repoRoot, "testdata/cards/unicode.json"))
	// A private agent never appears.
	mustRun(t, dir, "sign", "--register", "--agent", "internal", "--server", d.grpc, filepath.Join(repoRoot, "testdata/cards/security.json"))

	first := entries("billing", "payments")
	writeFile(t, filepath.Join(dir, "first.json"), first)
	// A stale cache in front of catalog.example keeps serving this catalog
	// and these cards, all correctly signed: a replay of an older release.
	stale := map[string][]byte{"/.well-known/ai-catalog.json": first}
	for _, id := range []string{"billing", "payments"} {
		stale["/agents/"+id+"/agent-card.json"] = get("/agents/" + id + "/agent-card.json")
	}
	staleFront := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, ok := stale[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	staleFront.TLS = front.TLS
	staleFront.StartTLS()
	t.Cleanup(staleFront.Close)
	var doc struct {
		Entries []struct {
			Identifier     string `json:"identifier"`
			TrustManifests []struct {
				Provenance []struct{ Relation, SourceID string } `json:"provenance"`
				Extensions map[string]struct {
					Version int64  `json:"version"`
					Commit  string `json:"commit"`
				} `json:"extensions"`
			} `json:"trustManifests"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(first, &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.Entries[0].TrustManifests[0]
	if len(m.Provenance) != 1 || m.Provenance[0].Relation != "publishedFrom" || !strings.HasSuffix(m.Provenance[0].SourceID, "/acme/billing") ||
		m.Extensions["dev.cardsign.release"].Commit != strings.Repeat("b", 40) || m.Extensions["dev.cardsign.release"].Version != 1 {
		t.Fatalf("billing's manifest does not name its pipeline: %+v", m)
	}
	if keys := didKeys(); len(keys) != 1 {
		t.Fatalf("did.json lists %v, want the one key", keys)
	}

	// The agent's own card, from its host, against a trust policy.
	trust := filepath.Join(dir, "trust.yaml")
	writeFile(t, trust, []byte(`rules:
  - host: payments.example
    did: did:web:catalog.example
    revocations: https://catalog.example/.well-known/cardsign-revocations.json
    max_revocations_age: 1h
    log_key: https://catalog.example/.well-known/cardsign-log-key
    require_log_proof: true
  - host: catalog.example
    did: did:web:catalog.example
    revocations: https://catalog.example/.well-known/cardsign-revocations.json
    catalog_signer: did:web:catalog.example
`))
	if r := cardsign(t, dir, nil, append(append([]string{"verify", "--trust", trust}, web...), "https://payments.example")...); r.Code != 0 || !strings.Contains(r.Stdout, "valid") {
		t.Fatalf("cardsign verify https://payments.example: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := cardsign(t, dir, nil, append(append([]string{"verify", "--trust", trust}, web...), "https://catalog.example")...); r.Code != 2 || !strings.Contains(r.Stderr, "404") {
		t.Fatalf("a host that serves no agent card: exit %d, want 2 naming the 404\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// A rotation: the new key is in did.json before it signs, then the
	// catalog and its manifests are signed again by it.
	admin("keys", "rotate", "--prepublish", "3s")
	keys := didKeys()
	if len(keys) != 2 {
		t.Fatalf("did.json after a rotation lists %v, want the active and the pending key", keys)
	}
	if r := verifyCatalog(catalogURL); r.Code != 0 {
		t.Fatalf("the catalog does not verify while a key is pending: %s%s", r.Stdout, r.Stderr)
	}
	oldKID := signedBy(t, first)[0]
	newKID := keys[0]
	if newKID == oldKID {
		newKID = keys[1]
	}
	testsupport.WaitFor(t, "the catalog signed by the new key", 30*time.Second, func() bool {
		kids := signedBy(t, get("/.well-known/ai-catalog.json"))
		return len(kids) == 3 && kids[0] == newKID && kids[1] == newKID && kids[2] == newKID
	})
	second := entries("billing", "payments")
	state := filepath.Join(dir, "state.json")
	if r := verifyCatalog("--state", state, catalogURL); r.Code != 0 {
		t.Fatalf("catalog verify --state: %s%s", r.Stdout, r.Stderr)
	}

	// Rollback: the stale cache's catalog is still correctly signed, by a
	// key the DID document still lists, over the cards it serves, but it
	// is older than what the state remembers.
	replay := []string{"catalog", "verify", "--ca-file", caFile, "--resolve", "catalog.example:443:" + staleFront.Listener.Addr().String()}
	if r := cardsign(t, dir, nil, append(replay, catalogURL)...); r.Code != 0 {
		t.Fatalf("without state, the replayed catalog verifies (nothing else can tell): exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := cardsign(t, dir, nil, append(replay, "--state", state, catalogURL)...); r.Code != 1 || strings.Count(r.Stdout, "rollback") != 2 {
		t.Fatalf("the replayed catalog was not refused as a rollback: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// A card revoked: it leaves the catalog at once, and the revocation
	// document refuses it in any copy that still lists it.
	admin("agents", "revoke", "billing", "--reason", "leaked with a staging URL")
	entries("payments")
	writeFile(t, filepath.Join(dir, "second.json"), second)
	r := verifyCatalog("--trust", trust, filepath.Join(dir, "second.json"))
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.Code != 1 || len(lines) != 3 || !strings.Contains(lines[1], "entry-revoked") || strings.Contains(lines[2], "entry-revoked") {
		t.Fatalf("the copy listing the revoked card: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// Expiry: a day later (signing.lifetime unset: signatures live 24h),
	// the kept copy's signatures have expired.
	later := time.Now().Add(25 * time.Hour).UTC().Format(time.RFC3339)
	r = verifyCatalog("--at", later, filepath.Join(dir, "second.json"))
	if r.Code != 1 || !strings.Contains(strings.SplitN(r.Stdout, "\n", 2)[0], "expired") {
		t.Fatalf("a catalog verified after its signature expired: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if !slices.ContainsFunc(strings.Split(r.Stdout, "\n"), func(l string) bool { return strings.HasPrefix(l, "entry[1]") && strings.Contains(l, "expired") }) {
		t.Fatalf("a manifest verified after it expired:\n%s", r.Stdout)
	}
}

// signedBy returns the kids of a catalog's signatures: the root's, then
// each entry's manifests' in order (from their protected headers).
func signedBy(t *testing.T, catalog []byte) []string {
	t.Helper()
	type sig struct {
		Signature struct{ JWS string } `json:"signature"`
	}
	var doc struct {
		sig
		Entries []struct {
			TrustManifests []sig `json:"trustManifests"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(catalog, &doc); err != nil {
		t.Fatal(err)
	}
	jwss := []string{doc.Signature.JWS}
	for _, e := range doc.Entries {
		for _, m := range e.TrustManifests {
			jwss = append(jwss, m.Signature.JWS)
		}
	}
	var kids []string
	for _, j := range jwss {
		protected, _, _ := strings.Cut(j, ".")
		raw, err := base64.RawURLEncoding.DecodeString(protected)
		var h struct{ Kid string }
		if err == nil {
			err = json.Unmarshal(raw, &h)
		}
		if err != nil {
			t.Fatalf("protected header of %q: %v", j, err)
		}
		kids = append(kids, h.Kid)
	}
	return kids
}
