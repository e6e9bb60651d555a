package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testbin"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// These tests start the real cardsignd binary on free loopback ports with a
// temporary data directory and drive it with the real cardsign binary.

var (
	daemonBin, cliBin string
	repoRoot          = testbin.RepoRoot()
)

func TestMain(m *testing.M) {
	testbin.Main(m, map[string]*string{".": &daemonBin, "../cardsign": &cliBin})
}

// daemon is a running cardsignd.
type daemon struct {
	t          testing.TB
	dataDir    string
	cmd        *exec.Cmd
	grpc, http string
	log        *testsupport.SyncBuffer
	exited     <-chan struct{}
	proc       *testsupport.Daemon
}

// startDaemon starts cardsignd over dataDir and waits until it says where it
// listens.
func startDaemon(t *testing.T, dataDir string, extra ...string) *daemon {
	t.Helper()
	return startDaemonEnv(t, nil, dataDir, extra...)
}

// startDaemonEnv is startDaemon with an environment (nil: inherit).
func startDaemonEnv(t testing.TB, env []string, dataDir string, extra ...string) *daemon {
	t.Helper()
	args := append([]string{"--data-dir", dataDir, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(daemonBin, args...)
	cmd.Env = env
	p := testsupport.StartDaemon(t, cmd, 30*time.Second)
	return &daemon{t: t, dataDir: dataDir, cmd: cmd, grpc: p.GRPC, http: p.HTTP, log: p.Log, exited: p.Exited(), proc: p}
}

// stop sends SIGTERM and requires a clean exit.
func (d *daemon) stop() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		if err := d.proc.Err(); err != nil {
			d.t.Fatalf("cardsignd exited with %v after SIGTERM\n%s", err, d.log.String())
		}
	case <-time.After(30 * time.Second):
		d.t.Fatalf("cardsignd did not stop within 30s of SIGTERM")
	}
}

func (d *daemon) jwksURL() string { return "http://" + d.http + "/.well-known/jwks.json" }

// result is what a run of cardsign or cardsignd left: its output and exit
// code.
type result = testbin.Result

// cli runs the cardsign binary with args in dir and returns its output and
// exit code.
func cli(t *testing.T, dir string, stdin []byte, args ...string) result {
	t.Helper()
	return testbin.Run(t, cliBin, dir, stdin, args...)
}

// mustCLI runs cardsign and fails the test unless it exits 0.
func mustCLI(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return testbin.MustRun(t, cliBin, dir, args...)
}

func cardFile(name string) string { return filepath.Join(repoRoot, "testdata", "cards", name) }

func httpGet(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func kids(t *testing.T, body []byte) []string {
	t.Helper()
	var set struct{ Keys []map[string]any }
	if err := json.Unmarshal(body, &set); err != nil {
		t.Fatalf("JWKS %s: %v", body, err)
	}
	var out []string
	for _, k := range set.Keys {
		for _, private := range []string{"d", "p", "q", "dp", "dq", "qi", "k"} {
			if _, ok := k[private]; ok {
				t.Fatalf("JWKS carries the private member %q: %s", private, body)
			}
		}
		out = append(out, k["kid"].(string))
	}
	return out
}

// sigKIDs returns the kids of a signed card's signatures.
func sigKIDs(t *testing.T, signed string) []string {
	t.Helper()
	var c struct{ Signatures []struct{ Protected string } }
	if err := json.Unmarshal([]byte(signed), &c); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range c.Signatures {
		raw, err := base64URL(s.Protected)
		if err != nil {
			t.Fatal(err)
		}
		var h struct{ Kid string }
		json.Unmarshal(raw, &h)
		out = append(out, h.Kid)
	}
	return out
}

func keyStates(t *testing.T, dir, addr string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(mustCLI(t, dir, "keys", "list", "--server", addr).Stdout, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) >= 3 {
			out[f[0]] = f[2]
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestDaemonLifecycleEndToEnd(t *testing.T) {
	work := t.TempDir()
	data := filepath.Join(work, "data")
	d := startDaemon(t, data)
	srv := d.grpc

	// The embedded default made and activated one ES256 key, mode 0600.
	states := keyStates(t, work, srv)
	if len(states) != 1 {
		t.Fatalf("want one key after first start, got %v", states)
	}
	var first string
	for k, s := range states {
		first = k
		if s != "active" {
			t.Fatalf("first key is %s, want active", s)
		}
	}
	keyFiles, _ := filepath.Glob(filepath.Join(data, "keys", "*"))
	for _, f := range keyFiles {
		if st, _ := os.Stat(f); st.Mode().Perm() != 0o600 {
			t.Fatalf("key file %s has mode %v", f, st.Mode())
		}
	}

	// Sign → verify against the served JWKS, with cardsign and @a2a-js/sdk.
	signed1 := mustCLI(t, work, "sign", "--server", srv, cardFile("security.json")).Stdout
	writeFile(t, filepath.Join(work, "card1.json"), signed1)
	mustCLI(t, work, "verify", "--jwks", d.jwksURL(), "card1.json")
	resp, body := httpGet(t, d.jwksURL())
	writeFile(t, filepath.Join(work, "jwks.json"), string(body))
	verifyJS(t, filepath.Join(work, "jwks.json"), filepath.Join(work, "card1.json"))
	etag := resp.Header.Get("ETag")
	if resp.Header.Get("Content-Type") != "application/jwk-set+json" || etag == "" || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("JWKS headers: %v", resp.Header)
	}
	if r, _ := httpGet(t, d.jwksURL(), "If-None-Match", etag); r.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: status %d, want 304", r.StatusCode)
	}

	// Rotate: the pending kid is published before it signs, and new cards
	// carry both signatures.
	rot := mustCLI(t, work, "keys", "rotate", "--prepublish", "1h", "--server", srv).Stdout
	second := strings.Fields(strings.Split(rot, "\n")[1])[0]
	if st := keyStates(t, work, srv); st[second] != "pending" || st[first] != "active" {
		t.Fatalf("after rotate: %v", st)
	}
	_, body = httpGet(t, d.jwksURL())
	if k := kids(t, body); !contains(k, first) || !contains(k, second) {
		t.Fatalf("JWKS during prepublication: %v", k)
	}
	writeFile(t, filepath.Join(work, "jwks-stale.json"), string(body)) // a verifier's cached copy
	signed2 := mustCLI(t, work, "sign", "--server", srv, cardFile("params.json")).Stdout
	// params.json has numbers in params: each key signs the spec bytes and
	// a2a-python ≤ 1.1's bytes.
	if k := sigKIDs(t, signed2); len(k) != 4 || k[0] != first || k[1] != first || k[2] != second || k[3] != second {
		t.Fatalf("during prepublication a card must carry the active and the pending key's signatures, got %v", k)
	}
	writeFile(t, filepath.Join(work, "card2.json"), signed2)
	mustCLI(t, work, "verify", "--all", "--jwks", d.jwksURL(), "card2.json")

	// Activate: new cards use the new kid only; old cards still verify.
	mustCLI(t, work, "keys", "activate", "--", second, "--server", srv)
	if st := keyStates(t, work, srv); st[second] != "active" || st[first] != "retired" {
		t.Fatalf("after activate: %v", st)
	}
	signed3 := mustCLI(t, work, "sign", "--server", srv, cardFile("unicode.json")).Stdout
	// Non-ASCII text: the spec bytes and a2a-python ≤ 1.1's, both by the new key.
	if k := sigKIDs(t, signed3); len(k) != 2 || k[0] != second || k[1] != second {
		t.Fatalf("after activation cards must be signed by %s only, got %v", second, k)
	}
	writeFile(t, filepath.Join(work, "card3.json"), signed3)
	mustCLI(t, work, "verify", "--jwks", d.jwksURL(), "card1.json")
	mustCLI(t, work, "verify", "--jwks", d.jwksURL(), "card3.json")

	// The only active key cannot be revoked without --force.
	if r := cli(t, work, nil, "keys", "revoke", "--", second, "--server", srv); r.Code == 0 || !strings.Contains(r.Stderr, "FailedPrecondition") {
		t.Fatalf("revoking the only active key without --force: exit %d %s", r.Code, r.Stderr)
	}

	// Revoke the old key: it leaves the JWKS, the revocation document lists
	// it, and a card signed only by it fails as revoked.
	mustCLI(t, work, "keys", "revoke", "--", first, "--reason", "key-compromise: laptop stolen", "--server", srv)
	_, body = httpGet(t, d.jwksURL())
	if k := kids(t, body); contains(k, first) || !contains(k, second) {
		t.Fatalf("JWKS after revocation: %v", k)
	}
	_, rev := httpGet(t, "http://"+d.http+"/.well-known/cardsign-revocations.json")
	if !bytes.Contains(rev, []byte(`"payload"`)) {
		t.Fatalf("revocation document: %s", rev)
	}
	r := cli(t, work, nil, "verify", "--jwks", d.jwksURL(), "card1.json")
	if r.Code != 1 || !strings.Contains(r.Stdout, "revoked") || !strings.Contains(r.Stdout, "key-compromise: laptop stolen") {
		t.Fatalf("a card signed only by a revoked key: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// A stale copy of the JWKS that still has the revoked key does not help:
	// the revocation document is consulted.
	r = cli(t, work, nil, "verify", "--jwks", filepath.Join(work, "jwks-stale.json"), "--revocations", "http://"+d.http+"/.well-known/cardsign-revocations.json", "card1.json")
	if r.Code != 1 || !strings.Contains(r.Stdout, "revoked") {
		t.Fatalf("stale JWKS + revocation document: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	mustCLI(t, work, "verify", "--jwks", d.jwksURL(), "card3.json")
	// card2 still verifies through its second signature.
	mustCLI(t, work, "verify", "--jwks", d.jwksURL(), "card2.json")

	// Restart: same keys, same states, same JWKS bytes, audit chain intact.
	before := keyStates(t, work, srv)
	_, jwksBefore := httpGet(t, d.jwksURL())
	d.stop()
	d = startDaemon(t, data)
	if after := keyStates(t, work, d.grpc); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("states changed across restart:\n%v\n%v", before, after)
	}
	resp, jwksAfter := httpGet(t, d.jwksURL())
	if !bytes.Equal(jwksBefore, jwksAfter) {
		t.Fatal("JWKS bytes changed across restart")
	}
	if r, _ := httpGet(t, d.jwksURL(), "If-None-Match", resp.Header.Get("ETag")); r.StatusCode != http.StatusNotModified {
		t.Fatal("ETag not stable across restart")
	}
	av := mustCLI(t, work, "audit", "verify", "--server", d.grpc).Stdout
	// One per signature (1 + 4 + 2) and one per key administration: the
	// first key's creation, the rotation, the activation, the revocation.
	if !strings.Contains(av, "audit chain intact: 11 records") || !strings.Contains(av, "key records agree with the audit trail: 2 keys") {
		t.Fatalf("audit verify: %s", av)
	}
	list := mustCLI(t, work, "audit", "list", "--json", "--server", d.grpc).Stdout
	if n := strings.Count(list, "\n"); n != 11 || !strings.Contains(list, `"outcome":"key.revoke"`) || !strings.Contains(list, `"card_name":"Secure Agent"`) || !strings.Contains(list, `"signature":"`) {
		t.Fatalf("audit list: %s", list)
	}

	// Revoke the last active key with --force: signing stops with
	// FAILED_PRECONDITION until a key is activated.
	mustCLI(t, work, "keys", "revoke", "--", second, "--force", "--reason", "unspecified: drill", "--server", d.grpc)
	if r := cli(t, work, nil, "sign", "--server", d.grpc, cardFile("security.json")); r.Code == 0 || !strings.Contains(r.Stderr, "FailedPrecondition") {
		t.Fatalf("signing with no active key: exit %d %s", r.Code, r.Stderr)
	}
	// A key change triggers a readiness check at once; it runs in the
	// background, so allow it a moment.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, body := httpGet(t, "http://"+d.http+"/readyz")
		if r.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "no active signing key") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz with no active key: %d %s", r.StatusCode, body)
		}
	}
	third := strings.Fields(strings.Split(mustCLI(t, work, "keys", "rotate", "--prepublish", "0s", "--server", d.grpc).Stdout, "\n")[1])[0]
	signed4 := mustCLI(t, work, "sign", "--server", d.grpc, cardFile("security.json")).Stdout
	if k := sigKIDs(t, signed4); len(k) != 1 || k[0] != third {
		t.Fatalf("after rotate --prepublish 0s: %v", k)
	}
	d.stop()
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// verifyJS checks cards with @a2a-js/sdk's verifyAgentCardSignature.
func verifyJS(t *testing.T, jwksFile string, cards ...string) {
	t.Helper()
	harness := filepath.Join(repoRoot, "testdata", "interop", "js")
	if _, err := os.Stat(filepath.Join(harness, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		t.Fatalf("@a2a-js/sdk is not installed: run scripts/test (%v)", err)
	}
	out, err := exec.Command("node", append([]string{filepath.Join(harness, "verify.mjs"), jwksFile}, cards...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("@a2a-js/sdk rejects: %v\n%s", err, out)
	}
}

func base64URL(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
