package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/buildinfo"
	"github.com/cardsign/cardsign/internal/testbin"
)

// TestVersion: cardsign version offline (text and JSON), and with --server
// against a real cardsignd that requires a token: any role's token gets
// the daemon's build, none is refused.
func TestVersion(t *testing.T) {
	clearConnEnv(t)
	want := buildinfo.Read()
	platform := runtime.GOOS + "/" + runtime.GOARCH

	r := runCLI(t, "version")
	if r.Code != exitOK || !strings.HasPrefix(r.Stdout, "cardsign "+want.Version+"\n") ||
		!strings.Contains(r.Stdout, "    go        "+want.GoVersion+" "+platform+"\n") || !strings.Contains(r.Stdout, "    backends  file") {
		t.Fatalf("version: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// $CARDSIGN_SERVER alone does not make version call out.
	t.Setenv(serverEnv, "127.0.0.1:1")
	if r := runCLI(t, "version", "--json"); r.Code != exitOK || strings.Contains(r.Stdout, `"server"`) {
		t.Fatalf("version --json with $%s: exit %d\n%s%s", serverEnv, r.Code, r.Stdout, r.Stderr)
	} else if v := decodeVersions(t, r.Stdout); v.Client.Version != want.Version || v.Client.Go != want.GoVersion ||
		v.Client.Platform != platform || !slices.Contains(v.Client.Backends, "file") {
		t.Fatalf("version --json: %+v, want %+v", v, want)
	}
	clearConnEnv(t)
	if r := runCLI(t, "version", "extra"); r.Code != exitUsage || !strings.Contains(r.Stderr, `unexpected argument "extra"`) {
		t.Fatalf("version extra: exit %d, %s", r.Code, r.Stderr)
	}

	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tok := "cst_version-test-auditor"
	sum := sha256.Sum256([]byte(tok))
	d := runDaemon(t, daemonBin, filepath.Join(dir, "data"),
		"replica: version-test\nauth:\n  tokens:\n    - {name: audit, sha256: "+hex.EncodeToString(sum[:])+", roles: [auditor]}\n")
	tokFile := filepath.Join(dir, "auditor.token")
	writeFile(t, tokFile, []byte(tok))

	// The daemon's version as its --version prints it: "(devel)", or a
	// pseudo-version when the toolchain stamped VCS data.
	dv := testbin.MustRun(t, daemonBin, dir, "--version")
	daemonVersion := strings.Fields(dv.Stdout)[1]
	r = cardsign(t, dir, nil, "version", "--server", d.grpc, "--token-file", tokFile)
	if r.Code != exitOK || !strings.Contains(r.Stdout, "\ncardsignd "+daemonVersion+"\n    replica   version-test\n") ||
		!strings.Contains(r.Stdout, "    backends  file, ") {
		t.Fatalf("version --server: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = cardsign(t, dir, nil, "version", "--json", "--server", d.grpc, "--token-file", tokFile)
	v := decodeVersions(t, r.Stdout)
	if r.Code != exitOK || v.Server == nil || v.Server.Version != daemonVersion || v.Server.Replica != "version-test" ||
		v.Server.Go != want.GoVersion || v.Server.Platform != platform || !slices.Contains(v.Server.Backends, "file") {
		t.Fatalf("version --json --server: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = cardsign(t, dir, nil, "version", "--server", d.grpc)
	if r.Code != exitFail || !strings.Contains(r.Stderr, "cardsign version: ") || !strings.Contains(r.Stderr, "authentication required") {
		t.Fatalf("version --server without a token: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

func decodeVersions(t *testing.T, out string) versions {
	t.Helper()
	var v versions
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("version --json printed %q: %v", out, err)
	}
	return v
}
