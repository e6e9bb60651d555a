// Package testbin builds the repository's commands once per test binary and
// runs them the way a user or a release pipeline would: as separate
// processes, with their own arguments, working directory and standard input.
//
// It is imported only from _test.go files, so nothing here reaches a
// production binary.
package testbin

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

// Main is a TestMain body: it builds each package of bins (a path as go build
// takes it, relative to the test's package directory) into a temporary
// directory, stores the binary's path where the map's value points, runs
// the tests, removes the directory and exits with the tests' code. The
// binary is named after the package's directory, as go build would name it.
// A failed build ends the run before any test starts.
func Main(m *testing.M, bins map[string]*string) {
	os.Exit(run(m, bins))
}

// run is Main without the exit, so that the deferred removal runs.
func run(m *testing.M, bins map[string]*string) int {
	dir, err := os.MkdirTemp("", "cardsign-testbin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for pkg, path := range bins {
		abs, err := filepath.Abs(pkg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		*path = filepath.Join(dir, filepath.Base(abs))
		build := exec.Command("go", "build", "-o", *path, pkg)
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n", pkg, err)
			return 1
		}
	}
	return m.Run()
}

// RepoRoot is the repository's top directory, found from this file's place
// in it, so tests reach testdata/ whatever their working directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Result is what one run of a binary left behind.
type Result struct {
	Stdout, Stderr string
	Code           int // the exit code
}

// Run runs bin with args in dir, with stdin (nil: none) as its standard
// input, and returns its output and exit code. A binary that cannot be
// started ends the test; a non-zero exit does not, callers check Code.
func Run(t testing.TB, bin, dir string, stdin []byte, args ...string) Result {
	t.Helper()
	cmd := exec.Command(bin, args...)
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
		t.Fatalf("%s %v: %v", filepath.Base(bin), args, err)
	}
	return Result{out.String(), errb.String(), code}
}

// MustRun runs bin like Run without standard input and ends the test,
// showing both outputs, unless it exits 0.
func MustRun(t testing.TB, bin, dir string, args ...string) Result {
	t.Helper()
	r := Run(t, bin, dir, nil, args...)
	if r.Code != 0 {
		t.Fatalf("%s %s: exit %d\nstdout: %s\nstderr: %s", filepath.Base(bin), strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r
}
