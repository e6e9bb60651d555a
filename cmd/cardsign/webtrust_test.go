package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/internal/testpki"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/webtrust"
)

// webSite is a TLS server with a certificate for names under a test CA,
// reached by the CLI through --resolve NAME:443:ADDR:PORT.
type webSite struct {
	caFile  string
	resolve []string
}

func newWebSite(t *testing.T, h http.Handler, names ...string) webSite {
	t.Helper()
	ca := testpki.NewCA(t, "cli web CA")
	certPEM, keyPEM := ca.Issue(t, testpki.Leaf{CommonName: names[0], DNSNames: names, Server: true})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	w := webSite{caFile: filepath.Join(t.TempDir(), "ca.pem")}
	writeFile(t, w.caFile, ca.CertPEM)
	for _, n := range names {
		w.resolve = append(w.resolve, "--resolve", n+":443:"+srv.Listener.Addr().String())
	}
	return w
}

// runWanting runs cardsign with base and args in dir and fails the test
// unless it exits code with each of lines in its standard output.
func runWanting(t *testing.T, dir string, base, args []string, code int, lines []string) result {
	t.Helper()
	r := cardsign(t, dir, nil, append(append([]string{}, base...), args...)...)
	if r.Code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.Code, code, r.Stdout, r.Stderr)
	}
	for _, want := range lines {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.Stdout)
		}
	}
	return r
}

func TestCLIVerifyURL(t *testing.T) {
	trusted, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	card := func(k *ecdsa.PrivateKey, kid string) []byte {
		data, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "cards", "spec-sample-stripped.json"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := signer.Sign(t.Context(), data, signer.Options{Keys: []signer.Key{{Signer: k, Alg: jose.ES256, KID: kid}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Card
	}
	pub, err := jose.NewJWK(trusted.Public(), "t1", jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	set, err := jwks.Set{Keys: []jose.JWK{pub}}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	cards := map[string][]byte{
		"good.agents.example":  card(trusted, "t1"),
		"other.agents.example": card(other, "o1"),
		"rogue.example":        card(trusted, "t1"),
	}
	site := newWebSite(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/jwks.json":
			w.Write(set)
		case r.URL.Path == "/.well-known/agent-card.json" && cards[r.Host] != nil:
			w.Write(cards[r.Host])
		default:
			http.NotFound(w, r)
		}
	}), "keys.example", "good.agents.example", "other.agents.example", "rogue.example", "gone.agents.example")
	dir := t.TempDir()
	trust := filepath.Join(dir, "trust.yaml")
	writeFile(t, trust, []byte("rules:\n  - host: \"*.agents.example\"\n    jwks: https://keys.example/jwks.json\n"))
	badTrust := filepath.Join(dir, "bad.yaml")
	writeFile(t, badTrust, []byte("rules:\n  - host: \"*.agents.example\"\n    jwks: https://keys.example/jwks.json\n    trust_everything: true\n"))

	base := append([]string{"verify", "--ca-file", site.caFile}, site.resolve...)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr string
	}{
		{"accepted", []string{"--trust", trust, "https://good.agents.example"}, exitOK,
			[]string{"card https://good.agents.example/.well-known/agent-card.json: trust rule *.agents.example (line 2): jwks https://keys.example/jwks.json", "signature[0] kid=t1 alg=ES256: valid"}, ""},
		{"untrusted key", []string{"--trust", trust, "https://other.agents.example"}, exitFail,
			[]string{"signature[0] kid=o1 alg=ES256: invalid", "refused: signature-invalid: signature[0]"}, ""},
		{"no rule for the host", []string{"--trust", trust, "https://rogue.example"}, exitFail,
			[]string{`refused: no-trust-rule: the trust policy has no rule for host "rogue.example"`}, ""},
		{"no card there", []string{"--trust", trust, "https://gone.agents.example"}, exitUsage, nil, "HTTP status 404"},
		{"no --trust", []string{"https://good.agents.example"}, exitUsage, nil, "needs --trust FILE"},
		{"--jwks with a URL", []string{"--trust", trust, "--jwks", "x.json", "https://good.agents.example"}, exitUsage, nil, "--jwks, --revocations, --log-key, --allow-jku and --profile are for a card file"},
		{"unknown field in the policy", []string{"--trust", badTrust, "https://good.agents.example"}, exitUsage, nil, "bad.yaml:4: rules[0].trust_everything: unknown field"},
		{"not https", []string{"--trust", trust, "http://good.agents.example"}, exitUsage, nil, "http://good.agents.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runWanting(t, dir, base, tc.args, tc.code, tc.stdout)
			if !strings.Contains(r.Stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, r.Stderr)
			}
		})
	}
}

func TestCLICatalogVerifyUsage(t *testing.T) {
	dir := t.TempDir()
	badState := filepath.Join(dir, "state.json")
	writeFile(t, badState, []byte(`{"entries":{"urn:air:a.example:a2a:x":{"issuedAt":"yesterday"}}}`))
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no argument", []string{"catalog", "verify"}, "want exactly one catalog URL or file"},
		{"two arguments", []string{"catalog", "verify", "a.json", "b.json"}, "want exactly one"},
		{"unknown subcommand", []string{"catalog", "list"}, `unknown subcommand "list"`},
		{"plain http", []string{"catalog", "verify", "http://catalog.example/.well-known/ai-catalog.json"}, "https only"},
		{"missing file", []string{"catalog", "verify", filepath.Join(dir, "none.json")}, "no such file"},
		{"bad resolve", []string{"catalog", "verify", "--resolve", "catalog.example:443", "x.json"}, "HOST:PORT:ADDR:TPORT"},
		{"bad state", []string{"catalog", "verify", "--state", badState, "x.json"}, "issuedAt: want an RFC 3339 time"},
		{"bad clock skew", []string{"catalog", "verify", "--clock-skew", "2h", "x.json"}, "--clock-skew"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cardsign(t, dir, nil, tc.args...)
			if r.Code != exitUsage || !strings.Contains(r.Stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and %q", r.Code, r.Stderr, tc.stderr)
			}
		})
	}
}

func TestPrintCatalogReportEscapes(t *testing.T) {
	issued := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	rep := &webtrust.CatalogReport{
		Report: &aicatalog.Report{
			Catalog: aicatalog.Result{Accepted: true, Signer: "did:web:a.example", IssuedAt: issued, ExpiresAt: issued.Add(time.Hour)},
			Entries: []aicatalog.EntryResult{
				{Index: 0, Identifier: "urn:air:a.example:a2a:x", Result: aicatalog.Result{Accepted: true, Signer: "did:web:a.example", IssuedAt: issued}},
				{Index: 1, Identifier: "urn:air:a.example:a2a:\x1b[2J", Result: aicatalog.Result{Reasons: []aicatalog.Reason{
					{Code: "subject-identifier-mismatch", Detail: "subject \"\u202e\" is not the entry's"}, {Code: "expired", Detail: "line\nforged"}}}},
			},
		},
		Releases: []webtrust.Release{{}, {}},
	}
	var out bytes.Buffer
	code := printCatalogReport(env{stdout: &out, stderr: &out}, "https://a.example/c.json", rep)
	want := "catalog https://a.example/c.json: accepted (signer did:web:a.example, issued 2026-11-28T10:00:00Z, expires 2026-11-28T11:00:00Z)\n" +
		"entry[0] urn:air:a.example:a2a:x: accepted (signer did:web:a.example, issued 2026-11-28T10:00:00Z, expires -)\n" +
		"entry[1] \"urn:air:a.example:a2a:\\x1b[2J\": refused: subject-identifier-mismatch: subject \"\\u202e\" is not the entry's; expired: line\\nforged\n"
	if code != exitFail || out.String() != want {
		t.Errorf("exit %d, output:\n%s\nwant:\n%s", code, out.String(), want)
	}
}
