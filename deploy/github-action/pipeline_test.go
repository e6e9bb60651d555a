package githubaction

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/oidctest"
	"github.com/cardsign/cardsign/internal/testbin"
	"github.com/cardsign/cardsign/internal/testpki"
	"github.com/cardsign/cardsign/internal/testsupport"
)

var daemonBin string

func TestMain(m *testing.M) {
	testbin.Main(m, map[string]*string{"../../cmd/cardsignd": &daemonBin})
}

// audience is the OIDC audience the test's cardsignd expects of both
// platforms' identity tokens; a deployment names its own, usually its URL.
const audience = "https://cardsign.example.com"

// testVersion is the release scripts/release builds for the tests.
const testVersion = "v0.0.1-test"

// cardFile is the sample card the pipelines sign (a unicode name and
// description: the bytes must survive the whole way).
const cardFile = "unicode.json"

// fixture is what a release pipeline talks to, all real and on loopback: a
// cardsignd with TLS that trusts two OIDC issuers (a stand-in for GitHub
// Actions, with its token endpoint, and one for GitLab), and an HTTPS
// server holding cardsign releases built by scripts/release, laid out as
// GitHub serves release assets (BASE/VERSION/FILE). The GitHub Action's test
// and the GitLab example's test share it.
type fixture struct {
	github, gitlab *oidctest.Issuer
	daemon         *testsupport.Daemon
	caPEM          []byte // the CA of cardsignd's certificate
	jwksURL        string
	releases       string // the release server's directory: VERSION/FILE
	baseURL        string // the release server's URL
	downloads      *atomic.Int64
	// roots is the runner's "system roots": the issuers' CAs and the
	// release server's certificate, but not cardsignd's private CA, which
	// the pipelines are given explicitly.
	roots string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{github: oidctest.New(t), gitlab: oidctest.New(t), downloads: &atomic.Int64{}}
	dir := t.TempDir()

	// cardsignd, with TLS on both listeners.
	ca := testpki.NewCA(t, "cardsignd test CA")
	f.caPEM = ca.CertPEM
	certPEM, keyPEM := ca.Issue(t, testpki.ServerLeaf())
	certFile, keyFile := testpki.WriteFiles(t, dir, "tls", certPEM, keyPEM)
	config := fmt.Sprintf(`limits:
  rate: 0
tls:
  cert_file: %[1]s
  key_file: %[2]s
auth:
  oidc:
    issuers:
      - issuer: %[3]s
        audience: %[5]s
        ca_file: %[4]s
        claims: {repository_owner: acme}
      - issuer: %[6]s
        audience: %[5]s
        ca_file: %[7]s
        claims: {namespace_path: acme}
    rules:
      - issuer: %[3]s
        claims: {repository: "acme/*"}
        roles: [signer]
      - issuer: %[6]s
        claims: {project_path: "acme/*"}
        roles: [signer]
`, certFile, keyFile, f.github.URL, f.github.CAFile, audience, f.gitlab.URL, f.gitlab.CAFile)
	cfg := testsupport.WriteFileMode(t, filepath.Join(dir, "cardsignd.yaml"), config, 0o600)
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemonBin, "--config", cfg, "--data-dir", data, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	f.daemon = testsupport.StartDaemon(t, cmd, 60*time.Second)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cardsignd log:\n%s", f.daemon.Log.String())
		}
	})
	f.jwksURL = "https://" + f.daemon.HTTP + "/.well-known/jwks.json"

	// The release server, with the archives scripts/release builds for
	// this machine's platform.
	f.releases = filepath.Join(dir, "releases")
	build := exec.Command(filepath.Join(testbin.RepoRoot(), "scripts", "release"), testVersion, filepath.Join(f.releases, testVersion))
	build.Env = append(os.Environ(), "RELEASE_PLATFORMS=linux/"+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, out)
	}
	files := http.FileServer(http.Dir(f.releases))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.downloads.Add(1)
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.baseURL = srv.URL

	var roots []byte
	for _, file := range []string{f.github.CAFile, f.gitlab.CAFile} {
		roots = append(roots, testsupport.ReadFile(t, file)...)
	}
	roots = append(roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})...)
	f.roots = testsupport.WriteFileMode(t, filepath.Join(dir, "roots.pem"), string(roots), 0o644)
	return f
}

// archive is the name of the release archive of version for this machine.
func archive(version string) string {
	return "cardsign_" + version + "_linux_" + runtime.GOARCH + ".tar.gz"
}

// sha256File is a file's SHA-256 in hex.
func sha256File(t *testing.T, name string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(testsupport.ReadFile(t, name)))
	return hex.EncodeToString(sum[:])
}

// publish puts a release of version on the release server: the test
// release's archive under version's name, its bytes passed through tamper
// (nil: unchanged), and a SHA256SUMS listing the sum sums gives it (nil:
// the served archive's). It returns the SHA-256 of the untampered archive:
// what a maintainer would have pinned for version.
func (f *fixture) publish(t *testing.T, version string, tamper func([]byte) []byte, sums func(served string) string) string {
	t.Helper()
	src := filepath.Join(f.releases, testVersion, archive(testVersion))
	pinned := sha256File(t, src)
	if version == testVersion {
		return pinned
	}
	data := []byte(testsupport.ReadFile(t, src))
	if tamper != nil {
		data = tamper(data)
	}
	dir := filepath.Join(f.releases, version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	served := testsupport.WriteFileMode(t, filepath.Join(dir, archive(version)), string(data), 0o644)
	sum := sha256File(t, served)
	if sums != nil {
		sum = sums(sum)
	}
	testsupport.WriteFileMode(t, filepath.Join(dir, "SHA256SUMS"), sum+"  "+archive(version)+"\n", 0o644)
	return pinned
}

// baseEnv is the environment a CI job starts with: a PATH, a HOME, and
// the machine's roots in the variables Go programs and curl read. Nothing
// of the test's own environment leaks in (no CARDSIGN_* variable).
func (f *fixture) baseEnv(t *testing.T) map[string]string {
	return map[string]string{
		"PATH":           os.Getenv("PATH"),
		"HOME":           t.TempDir(),
		"SSL_CERT_FILE":  f.roots,
		"CURL_CA_BUNDLE": f.roots,
	}
}

// envList turns an environment map into exec.Cmd's form.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// signedKIDs are the kids in the protected headers of a signed card's
// signatures, in order.
func signedKIDs(t *testing.T, signedCard string) []string {
	t.Helper()
	var card struct {
		Signatures []struct {
			Protected string `json:"protected"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal([]byte(testsupport.ReadFile(t, signedCard)), &card); err != nil {
		t.Fatalf("signed card %s: %v", signedCard, err)
	}
	var kids []string
	for _, s := range card.Signatures {
		raw, err := base64.RawURLEncoding.DecodeString(s.Protected)
		var h struct {
			KID string `json:"kid"`
		}
		if err == nil {
			err = json.Unmarshal(raw, &h)
		}
		if err != nil || h.KID == "" {
			t.Fatalf("signed card %s: a protected header without a kid (%v): %q", signedCard, err, raw)
		}
		kids = append(kids, h.KID)
	}
	return kids
}

// jwksKIDs are the kids of the keys cardsignd publishes, read over HTTPS
// with its CA.
func (f *fixture) jwksKIDs(t *testing.T) []string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(f.jwksURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Keys []struct {
			KID string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d, %v", f.jwksURL, resp.StatusCode, err)
	}
	var kids []string
	for _, k := range doc.Keys {
		kids = append(kids, k.KID)
	}
	return kids
}
