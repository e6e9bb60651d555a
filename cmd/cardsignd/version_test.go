package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testbin"
)

// TestVersionStamped builds cardsignd as the container build does without
// .git (-ldflags -X with a version and revision) and with three backends left
// out by build tags: --version, --check-config and the start-up line report
// that build.
func TestVersionStamped(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "cardsignd")
	const pkg = "github.com/cardsign/cardsign/buildinfo"
	build := exec.Command("go", "build", "-buildvcs=false", "-tags", "nopkcs11,nogcpkms,novault",
		"-ldflags", "-X "+pkg+".version=v9.8.7-test -X "+pkg+".revision=0123456789abcdef0123456789abcdef01234567", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	goLine := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH

	r := testbin.Run(t, bin, dir, nil, "--version")
	want := "cardsignd v9.8.7-test (0123456789ab, " + goLine + ")\nbackends: file, awskms, azurekv\n"
	if r.Code != 0 || r.Stdout != want || r.Stderr != "" {
		t.Fatalf("--version: exit %d\nstdout %q, want %q\nstderr %s", r.Code, r.Stdout, want, r.Stderr)
	}

	cfg := filepath.Join(dir, "cardsignd.yaml")
	if err := os.WriteFile(cfg, []byte("data_dir: "+filepath.Join(dir, "data")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := testbin.Run(t, bin, dir, nil, "--check-config", cfg); r.Code != 0 || r.Stderr != "cardsignd v9.8.7-test (0123456789ab, "+goLine+")\n"+cfg+": ok\n" {
		t.Fatalf("--check-config: exit %d\n%s", r.Code, r.Stderr)
	}

	// The default build (testbin's: "(devel)", or a pseudo-version when
	// the toolchain stamps VCS data) has every backend this machine can
	// build.
	r = testbin.Run(t, daemonBin, dir, nil, "--version")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "cardsignd ") || !strings.Contains(r.Stdout, goLine+")\nbackends: file, ") {
		t.Fatalf("--version of the test build: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
