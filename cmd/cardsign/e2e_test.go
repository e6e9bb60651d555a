package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testbin"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// These tests run the real cardsign binary, built once in TestMain, the way
// a release pipeline would.

var (
	cardsignBin, daemonBin string
	repoRoot               = testbin.RepoRoot()
)

func TestMain(m *testing.M) {
	testbin.Main(m, map[string]*string{".": &cardsignBin, "../cardsignd": &daemonBin})
}

// result is what a run of cardsign left: its output and exit code.
type result = testbin.Result

// cardsign runs the binary with args in dir and returns its output and exit code.
func cardsign(t *testing.T, dir string, stdin []byte, args ...string) result {
	t.Helper()
	return testbin.Run(t, cardsignBin, dir, stdin, args...)
}

// mustRun runs cardsign and fails the test unless it exits 0.
func mustRun(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return testbin.MustRun(t, cardsignBin, dir, args...)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCLIHelpHasExamples(t *testing.T) {
	for _, c := range commands() {
		r := cardsign(t, t.TempDir(), nil, c.name, "--help")
		if r.Code != 0 || !strings.Contains(r.Stdout, "Example:") || !strings.Contains(r.Stdout, "cardsign "+c.name) {
			t.Errorf("cardsign %s --help: exit %d, output:\n%s", c.name, r.Code, r.Stdout)
		}
	}
	if r := cardsign(t, t.TempDir(), nil, "frobnicate"); r.Code != exitUsage || !strings.Contains(r.Stderr, "unknown command") {
		t.Errorf("unknown command: exit %d, stderr %s", r.Code, r.Stderr)
	}
}

func TestCLICanonicalizeStdinAndExactBytes(t *testing.T) {
	in := []byte(`{"name":"Example Agent","description":"","capabilities":{"streaming":false,"pushNotifications":false,"extensions":[]},"skills":[]}`)
	r := cardsign(t, t.TempDir(), in, "canonicalize", "-")
	want := `{"capabilities":{"pushNotifications":false,"streaming":false},"description":"","name":"Example Agent","skills":[]}`
	if r.Code != 0 || r.Stdout != want {
		t.Fatalf("canonicalize: exit %d, got %q, want %q (no trailing newline)", r.Code, r.Stdout, want)
	}
	r = cardsign(t, t.TempDir(), in, "canonicalize", "--profile", "sdk", "-")
	if want := `{"capabilities":{"pushNotifications":false,"streaming":false},"name":"Example Agent"}`; r.Code != 0 || r.Stdout != want {
		t.Fatalf("canonicalize --profile sdk: exit %d, got %q, want %q", r.Code, r.Stdout, want)
	}
	if r := cardsign(t, t.TempDir(), in, "canonicalize", "--max-bytes", "0", "-"); r.Code != exitUsage || !strings.Contains(r.Stderr, "must be positive") {
		t.Fatalf("--max-bytes 0: exit %d, stderr %s", r.Code, r.Stderr)
	}
	if r := cardsign(t, t.TempDir(), in, "canonicalize", "--max-bytes", "50", "-"); r.Code != exitUsage || !strings.Contains(r.Stderr, "max-size") {
		t.Fatalf("--max-bytes 50 on a 127-byte card: exit %d, stderr %s", r.Code, r.Stderr)
	}
	r = cardsign(t, t.TempDir(), []byte(`{"a":1,"a":2}`), "canonicalize", "-")
	if r.Code != exitUsage || !strings.Contains(r.Stderr, "duplicate-key") {
		t.Fatalf("duplicate keys: exit %d, stderr %s", r.Code, r.Stderr)
	}
}

func TestCLILint(t *testing.T) {
	dir := t.TempDir()
	r := cardsign(t, dir, nil, "lint", filepath.Join(repoRoot, "testdata/cards/security.json"))
	if r.Code != 0 {
		t.Fatalf("clean card: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	sample := filepath.Join(repoRoot, "testdata/cards/spec-sample.json")
	r = cardsign(t, dir, nil, "lint", sample)
	if r.Code != exitFail || !strings.Contains(r.Stdout, "error security:") || !strings.Contains(r.Stdout, "[unknown-field]") {
		t.Fatalf("spec sample has v0.3 keys: exit %d\n%s", r.Code, r.Stdout)
	}
	r = cardsign(t, dir, nil, "lint", "--strip-unknown", sample)
	if r.Code != 0 || !strings.Contains(r.Stderr, "removed security") {
		t.Fatalf("lint --strip-unknown: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = cardsign(t, dir, []byte(`{"name":"x"`), "lint", "-")
	if r.Code != exitFail || !strings.Contains(r.Stdout, "[syntax]") {
		t.Fatalf("malformed card: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

func TestCLIUpgrade(t *testing.T) {
	r := mustRun(t, t.TempDir(), "upgrade", filepath.Join(repoRoot, "testdata/cards/v03.json"))
	if !strings.Contains(r.Stdout, `"supportedInterfaces"`) || strings.Contains(r.Stdout, `"preferredTransport"`) {
		t.Fatalf("upgrade output:\n%s", r.Stdout)
	}
	if !strings.Contains(r.Stderr, "mapped a v0.3 card") {
		t.Fatalf("upgrade must say what it changed: %s", r.Stderr)
	}
}

func TestCLIKeygenRefusesOverwriteAndLooseFiles(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, dir, "keygen", "--alg", "ES256", "--out", "k.pem")
	st, err := os.Stat(filepath.Join(dir, "k.pem"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st.Mode(), err)
	}
	if r := cardsign(t, dir, nil, "keygen", "--alg", "ES256", "--out", "k.pem"); r.Code == 0 {
		t.Fatal("keygen overwrote an existing key file")
	}
	if err := os.Chmod(filepath.Join(dir, "k.pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cardsign(t, dir, nil, "jwks", "--key", "file:k.pem")
	if r.Code == 0 || !strings.Contains(r.Stderr, "chmod 600") {
		t.Fatalf("a world-readable key must be refused: exit %d %s", r.Code, r.Stderr)
	}
	if strings.Contains(r.Stderr, "PRIVATE KEY") {
		t.Fatal("error output leaks key material")
	}
}

func TestCLISignRefusesLintFailure(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, dir, "keygen", "--out", "k.pem")
	r := cardsign(t, dir, nil, "sign", "--key", "file:k.pem", filepath.Join(repoRoot, "testdata/cards/spec-sample.json"))
	if r.Code != exitFail || !strings.Contains(r.Stderr, "refusing to sign") || r.Stdout != "" {
		t.Fatalf("sign of a card with unknown keys: exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestCLISignResultFile: --result-file holds each signature's kid, alg and
// profile as the signed card has them; a result file that cannot be
// written fails the command before it prints a card.
func TestCLISignResultFile(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, dir, "keygen", "--alg", "ES256", "--out", "k.pem")
	card := filepath.Join(repoRoot, "testdata/cards/unicode.json")
	r := mustRun(t, dir, "sign", "--key", "file:k.pem", "--kid", "release-1", "--result-file", "result.json", card)
	var got signResult
	if err := json.Unmarshal([]byte(testsupport.ReadFile(t, filepath.Join(dir, "result.json"))), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Signatures) == 0 {
		t.Fatal("result file lists no signature")
	}
	for _, s := range got.Signatures {
		if s.KID != "release-1" || s.Alg != "ES256" || s.Profile == "" || s.AuditSequence != 0 ||
			!strings.Contains(r.Stderr, "signed with kid release-1 (ES256, "+s.Profile+" profile)") {
			t.Errorf("result %+v does not match what sign reported:\n%s", s, r.Stderr)
		}
	}
	bad := cardsign(t, dir, nil, "sign", "--key", "file:k.pem", "--result-file", filepath.Join(dir, "missing", "result.json"), card)
	// Refused before anything is signed (through cardsignd, no signature
	// is made and audited that the command could not hand over).
	if bad.Code != exitUsage || bad.Stdout != "" || !strings.Contains(bad.Stderr, "--result-file") || strings.Contains(bad.Stderr, "signed with") {
		t.Errorf("unwritable result file: exit %d, stdout %d bytes, stderr %s", bad.Code, len(bad.Stdout), bad.Stderr)
	}
}

// TestCLIPKCS11ModuleNotSet: a pkcs11: key whose module-path is not in
// CARDSIGN_PKCS11_MODULE is refused, before any library is loaded, with a
// message naming the module asked for and the variable to set.
func TestCLIPKCS11ModuleNotSet(t *testing.T) {
	const module = "/usr/lib/cardsign-test/no-such-p11.so"
	card := filepath.Join(repoRoot, "testdata/cards/security.json")
	for _, set := range []string{"", "/usr/lib/cardsign-test/other-p11.so"} {
		t.Setenv(pkcs11ModuleEnv, set)
		r := cardsign(t, t.TempDir(), nil, "sign", "--key", "pkcs11:token=t;object=k?module-path="+module, card)
		if r.Code != exitUsage || !strings.Contains(r.Stderr, module) || !strings.Contains(r.Stderr, pkcs11ModuleEnv) || r.Stdout != "" {
			t.Errorf("%s=%q: exit %d\nstdout %s\nstderr %s", pkcs11ModuleEnv, set, r.Code, r.Stdout, r.Stderr)
		}
	}
	t.Setenv(pkcs11ModuleEnv, "")
	r := cardsign(t, t.TempDir(), nil, "sign", "--key", "pkcs11:token=t;object=k", card)
	if r.Code != exitUsage || !strings.Contains(r.Stderr, "set "+pkcs11ModuleEnv) {
		t.Errorf("no module-path, %s unset: exit %d\nstderr %s", pkcs11ModuleEnv, r.Code, r.Stderr)
	}
}
