package main

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cardsign/cardsign/internal/testbin"
	"github.com/cardsign/cardsign/store/postgres"
	"github.com/cardsign/cardsign/store/sqlite"
)

// What the start checks and --check-config refuse, and that a refused
// start writes nothing.

// snapshot is every file and directory under dir with its mode and a hash
// of its content; a directory that does not exist is empty.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) && path == dir {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[path] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree fails the test when a refused start changed dir.
func sameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, v := range after {
		if before[p] != v {
			t.Errorf("%s: %s was written (%s)", what, p, v)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s: %s was removed", what, p)
		}
	}
}

// loopbackListener listens on a free loopback port until the test ends.
func loopbackListener(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// takenPort is a loopback address another listener holds for the test.
func takenPort(t *testing.T) string {
	t.Helper()
	return loopbackListener(t).Addr().String()
}

// A start refused because a port is taken leaves no data directory, no
// database, no first key and no log key behind; on a data directory in use
// before, nothing in it changes.
func TestRefusedStartChangesNothing(t *testing.T) {
	work := t.TempDir()
	used := filepath.Join(work, "used")
	d := startDaemon(t, used)
	d.stop()
	for _, tc := range []struct {
		name, data, grpc, http, want string
	}{
		{"fresh, gRPC port taken", filepath.Join(work, "fresh1"), takenPort(t), "127.0.0.1:0", "gRPC listener"},
		{"fresh, HTTP port taken", filepath.Join(work, "fresh2"), "127.0.0.1:0", takenPort(t), "HTTP listener"},
		{"in use before, gRPC port taken", used, takenPort(t), "127.0.0.1:0", "gRPC listener"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, tc.data)
			r := runDaemonOnce(t, "--data-dir", tc.data, "--grpc-addr", tc.grpc, "--http-addr", tc.http)
			if r.Code != 1 || !strings.Contains(r.Stderr, tc.want) || !strings.Contains(r.Stderr, "address already in use") {
				t.Fatalf("start on a taken port: exit %d\n%s", r.Code, r.Stderr)
			}
			sameTree(t, tc.name, before, snapshot(t, tc.data))
		})
	}
}

// nopkcs11Bin is cardsignd built without PKCS#11, built once by the first
// test that needs it.
var nopkcs11Bin struct {
	once sync.Once
	path string
	err  error
}

func buildNoPKCS11(t *testing.T) string {
	t.Helper()
	nopkcs11Bin.once.Do(func() {
		dir, err := os.MkdirTemp("", "cardsignd-nopkcs11-")
		if err != nil {
			nopkcs11Bin.err = err
			return
		}
		// Left for the OS's temporary directory cleaning: testbin.Main
		// ends the process without running deferred removals.
		nopkcs11Bin.path = filepath.Join(dir, "cardsignd")
		out, err := exec.Command("go", "build", "-tags", "nopkcs11", "-o", nopkcs11Bin.path, ".").CombinedOutput()
		if err != nil {
			nopkcs11Bin.err = fmt.Errorf("go build -tags nopkcs11: %v\n%s", err, out)
		}
	})
	if nopkcs11Bin.err != nil {
		t.Fatal(nopkcs11Bin.err)
	}
	return nopkcs11Bin.path
}

// What the daemon refuses at start, --check-config refuses too, naming the
// field; and the refused start leaves the data directory as it was. The
// configs here passed --check-config before the start checks ran in it.
func TestCheckConfigRefusesWhatStartRefuses(t *testing.T) {
	work := t.TempDir()
	noPKCS11 := buildNoPKCS11(t)
	pkcs11Section := "pkcs11:\n  module: /usr/lib/softhsm/libsofthsm2.so\n  token: cardsign\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"pkcs11 section", pkcs11Section, []string{"c.yaml:4:1: pkcs11: needs the pkcs11 backend, and this cardsignd was built without it: rebuild cardsignd with cgo"}},
		{"pkcs11 for new keys", pkcs11Section + "keys:\n  backend: pkcs11\n", []string{"c.yaml:8:3: keys.backend: needs the pkcs11 backend"}},
		{"pkcs11 log key", "log:\n  keys: [\"pkcs11:token=cardsign;object=log\"]\n", []string{"c.yaml:5:10: log.keys[0]: needs the pkcs11 backend"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(work, strings.ReplaceAll(tc.name, " ", "-"))
			cfg := filepath.Join(t.TempDir(), "c.yaml")
			writeFile(t, cfg, fmt.Sprintf("data_dir: %q\ngrpc_addr: 127.0.0.1:0\nhttp_addr: 127.0.0.1:0\n%s", data, tc.yaml))
			for _, args := range [][]string{{"--check-config", cfg}, {"--config", cfg}} {
				r := testbin.Run(t, noPKCS11, "", nil, args...)
				if r.Code != 1 {
					t.Errorf("%v without PKCS#11 in the build: exit %d, want 1\n%s", args, r.Code, r.Stderr)
				}
				for _, w := range tc.want {
					if !strings.Contains(r.Stderr, w) {
						t.Errorf("%v does not say %q:\n%s", args, w, r.Stderr)
					}
				}
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("the refused start made %s (%v)", data, err)
			}
		})
	}
}

// store.url set while the data directory still holds the embedded
// database, without the copy: --check-config and the start both refuse,
// and neither migrates the database (a later store copy needs it empty).
func TestCheckConfigRefusesStoreBesideSQLite(t *testing.T) {
	raw := newPGDatabase(t)
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	lite, err := sqlite.Open(t.Context(), filepath.Join(data, "cardsign.db"))
	if err != nil {
		t.Fatal(err)
	}
	lite.Close()
	before := snapshot(t, data)
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	writeFile(t, cfg, fmt.Sprintf("data_dir: %q\nstore:\n  url: %q\n", data, raw))
	for _, args := range [][]string{{"--check-config", cfg}, {"--config", cfg, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}} {
		r := runDaemonOnce(t, args...)
		if r.Code != 1 || !strings.Contains(r.Stderr, "store.url names an empty database") ||
			!strings.Contains(r.Stderr, "cardsignd store copy --from "+filepath.Join(data, "cardsign.db")) {
			t.Errorf("%s: exit %d, want 1 and the store copy to run\n%s", args[0], r.Code, r.Stderr)
		}
		noLeak(t, args[0], r.Stderr, pgPassword(t, raw))
	}
	c, err := postgres.Inspect(t.Context(), postgres.Config{URL: raw})
	if err != nil {
		t.Fatal(err)
	}
	if c.Schema.Current != 0 {
		t.Errorf("the refused start migrated the database: schema %s", c.Schema)
	}
	sameTree(t, "refused start", before, snapshot(t, data))
}

func pgPassword(t *testing.T, raw string) string {
	t.Helper()
	_, pw := pgParts(t, raw)
	return pw
}

// --check-config reads its file only when it is a small regular file:
// /dev/zero would be read until memory runs out, a FIFO would hang it.
func TestCheckConfigSpecialFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/dev/zero": "config: /dev/zero is not a regular file (it is a character device)",
		fifo:        "config: " + fifo + " is not a regular file (it is a FIFO)",
	} {
		for _, args := range [][]string{{"--check-config", path}, {"--config", path}} {
			r := runDaemonOnce(t, args...)
			if r.Code == 0 || !strings.Contains(r.Stderr, want) {
				t.Errorf("%v: exit %d\n%s", args, r.Code, r.Stderr)
			}
		}
	}
}

// mkdirMode makes a directory with exactly mode (the umask does not apply).
func mkdirMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestDaemonRefusesWritableStateDirs: a pre-existing data or key directory
// that other users may write is refused at start and by --check-config,
// naming the path, its mode and the chmod to run; one they may read is
// used with a warning saying the same.
func TestDaemonRefusesWritableStateDirs(t *testing.T) {
	work := t.TempDir()

	data := filepath.Join(work, "open-data")
	mkdirMode(t, data, 0o777)
	r := runDaemonOnce(t, "--data-dir", data, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	for _, want := range []string{"data_dir", data, "0777", "chmod 700 " + data} {
		if r.Code == 0 || !strings.Contains(r.Stderr, want) {
			t.Fatalf("world-writable data_dir: exit %d, want a refusal mentioning %q:\n%s", r.Code, want, r.Stderr)
		}
	}
	cfg := filepath.Join(work, "c.yaml")
	writeFile(t, cfg, "data_dir: "+data+"\n")
	r = runDaemonOnce(t, "--check-config", cfg)
	if r.Code == 0 || !strings.Contains(r.Stderr, "chmod 700 "+data) || !strings.Contains(r.Stderr, "c.yaml:1:1: data_dir") {
		t.Fatalf("--check-config with a world-writable data_dir: exit %d\n%s", r.Code, r.Stderr)
	}

	keys := filepath.Join(work, "keys")
	mkdirMode(t, keys, 0o770)
	cfg = filepath.Join(work, "k.yaml")
	writeFile(t, cfg, "keys:\n  dir: "+keys+"\n")
	r = runDaemonOnce(t, "--config", cfg, "--data-dir", filepath.Join(work, "data"), "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	if r.Code == 0 || !strings.Contains(r.Stderr, "keys.dir") || !strings.Contains(r.Stderr, "0770") || !strings.Contains(r.Stderr, "chmod 700 "+keys) {
		t.Fatalf("group-writable keys.dir: exit %d\n%s", r.Code, r.Stderr)
	}

	// Readable by others: a warning with the fix, and the daemon serves.
	if err := os.Chmod(keys, 0o755); err != nil {
		t.Fatal(err)
	}
	r = runDaemonOnce(t, "--check-config", cfg)
	if r.Code != 0 || !strings.Contains(r.Stderr, "warning: keys.dir") || !strings.Contains(r.Stderr, "chmod 700 "+keys) {
		t.Fatalf("--check-config with a world-readable keys.dir: exit %d\n%s", r.Code, r.Stderr)
	}
	d := startDaemon(t, filepath.Join(work, "data"), "--config", cfg)
	if log := d.log.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "chmod 700 "+keys) {
		t.Fatalf("world-readable keys.dir: no warning with the fix:\n%s", log)
	}
	d.stop()
}
