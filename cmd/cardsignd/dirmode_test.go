package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
