package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// These tests run the real cardsign binary, built once in TestMain, the way
// a release pipeline would.

var (
	cardsignBin string
	repoRoot    string
)

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Join(filepath.Dir(file), "..", "..")
	dir, err := os.MkdirTemp("", "cardsign-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cardsignBin = filepath.Join(dir, "cardsign")
	build := exec.Command("go", "build", "-o", cardsignBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cardsign:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// cardsign runs the binary with args in dir and returns its output and exit code.
func cardsign(t *testing.T, dir string, stdin []byte, args ...string) result {
	t.Helper()
	cmd := exec.Command(cardsignBin, args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("cardsign %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// mustRun runs cardsign and fails the test unless it exits 0.
func mustRun(t *testing.T, dir string, args ...string) result {
	t.Helper()
	r := cardsign(t, dir, nil, args...)
	if r.code != 0 {
		t.Fatalf("cardsign %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
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
		if r.code != 0 || !strings.Contains(r.stdout, "Example:") || !strings.Contains(r.stdout, "cardsign "+c.name) {
			t.Errorf("cardsign %s --help: exit %d, output:\n%s", c.name, r.code, r.stdout)
		}
	}
	if r := cardsign(t, t.TempDir(), nil, "frobnicate"); r.code != exitUsage || !strings.Contains(r.stderr, "unknown command") {
		t.Errorf("unknown command: exit %d, stderr %s", r.code, r.stderr)
	}
}

func TestCLICanonicalizeStdinAndExactBytes(t *testing.T) {
	in := []byte(`{"name":"Example Agent","description":"","capabilities":{"streaming":false,"pushNotifications":false,"extensions":[]},"skills":[]}`)
	r := cardsign(t, t.TempDir(), in, "canonicalize", "-")
	want := `{"capabilities":{"pushNotifications":false,"streaming":false},"description":"","name":"Example Agent","skills":[]}`
	if r.code != 0 || r.stdout != want {
		t.Fatalf("canonicalize: exit %d, got %q, want %q (no trailing newline)", r.code, r.stdout, want)
	}
	r = cardsign(t, t.TempDir(), in, "canonicalize", "--profile", "sdk", "-")
	if want := `{"capabilities":{"pushNotifications":false,"streaming":false},"name":"Example Agent"}`; r.code != 0 || r.stdout != want {
		t.Fatalf("canonicalize --profile sdk: exit %d, got %q, want %q", r.code, r.stdout, want)
	}
	if r := cardsign(t, t.TempDir(), in, "canonicalize", "--max-bytes", "0", "-"); r.code != exitUsage || !strings.Contains(r.stderr, "must be positive") {
		t.Fatalf("--max-bytes 0: exit %d, stderr %s", r.code, r.stderr)
	}
	if r := cardsign(t, t.TempDir(), in, "canonicalize", "--max-bytes", "50", "-"); r.code != exitUsage || !strings.Contains(r.stderr, "max-size") {
		t.Fatalf("--max-bytes 50 on a 127-byte card: exit %d, stderr %s", r.code, r.stderr)
	}
	r = cardsign(t, t.TempDir(), []byte(`{"a":1,"a":2}`), "canonicalize", "-")
	if r.code != exitUsage || !strings.Contains(r.stderr, "duplicate-key") {
		t.Fatalf("duplicate keys: exit %d, stderr %s", r.code, r.stderr)
	}
}

func TestCLILint(t *testing.T) {
	dir := t.TempDir()
	r := cardsign(t, dir, nil, "lint", filepath.Join(repoRoot, "testdata/cards/security.json"))
	if r.code != 0 {
		t.Fatalf("clean card: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	sample := filepath.Join(repoRoot, "testdata/cards/spec-sample.json")
	r = cardsign(t, dir, nil, "lint", sample)
	if r.code != exitFail || !strings.Contains(r.stdout, "error security:") || !strings.Contains(r.stdout, "[unknown-field]") {
		t.Fatalf("spec sample has v0.3 keys: exit %d\n%s", r.code, r.stdout)
	}
	r = cardsign(t, dir, nil, "lint", "--strip-unknown", sample)
	if r.code != 0 || !strings.Contains(r.stderr, "removed security") {
		t.Fatalf("lint --strip-unknown: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cardsign(t, dir, []byte(`{"name":"x"`), "lint", "-")
	if r.code != exitFail || !strings.Contains(r.stdout, "[syntax]") {
		t.Fatalf("malformed card: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestCLIUpgrade(t *testing.T) {
	r := mustRun(t, t.TempDir(), "upgrade", filepath.Join(repoRoot, "testdata/cards/v03.json"))
	if !strings.Contains(r.stdout, `"supportedInterfaces"`) || strings.Contains(r.stdout, `"preferredTransport"`) {
		t.Fatalf("upgrade output:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "mapped a v0.3 card") {
		t.Fatalf("upgrade must say what it changed: %s", r.stderr)
	}
}

func TestCLIKeygenRefusesOverwriteAndLooseFiles(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, dir, "keygen", "--alg", "ES256", "--out", "k.pem")
	st, err := os.Stat(filepath.Join(dir, "k.pem"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st.Mode(), err)
	}
	if r := cardsign(t, dir, nil, "keygen", "--alg", "ES256", "--out", "k.pem"); r.code == 0 {
		t.Fatal("keygen overwrote an existing key file")
	}
	if err := os.Chmod(filepath.Join(dir, "k.pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cardsign(t, dir, nil, "jwks", "--key", "file:k.pem")
	if r.code == 0 || !strings.Contains(r.stderr, "chmod 600") {
		t.Fatalf("a world-readable key must be refused: exit %d %s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "PRIVATE KEY") {
		t.Fatal("error output leaks key material")
	}
}

func TestCLISignRefusesLintFailure(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, dir, "keygen", "--out", "k.pem")
	r := cardsign(t, dir, nil, "sign", "--key", "file:k.pem", filepath.Join(repoRoot, "testdata/cards/spec-sample.json"))
	if r.code != exitFail || !strings.Contains(r.stderr, "refusing to sign") || r.stdout != "" {
		t.Fatalf("sign of a card with unknown keys: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}
