package daemonconfig

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
)

// dirsWithModes makes a directory below a temporary one for each name,
// with exactly its mode (the umask does not apply), and returns the paths.
func dirsWithModes(t *testing.T, modes map[string]os.FileMode) map[string]string {
	t.Helper()
	work, paths := t.TempDir(), map[string]string{}
	for name, mode := range modes {
		paths[name] = filepath.Join(work, name)
		if err := os.Mkdir(paths[name], 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(paths[name], mode); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

func TestCheckDirModes(t *testing.T) {
	d := dirsWithModes(t, map[string]os.FileMode{"private": 0o700, "readable": 0o755, "writable": 0o770})
	private, readable, writable := d["private"], d["readable"], d["writable"]
	notDir := testsupport.WriteFileMode(t, filepath.Join(t.TempDir(), "file"), "", 0o600)
	probs, warns := checkDirModes([]stateDir{
		{"data_dir", private},
		{"data_dir", filepath.Join(private, "not-yet")}, // created 0700 at start
		{"keys.dir", readable},
		{"keys.dir", writable},
		{"data_dir", notDir},
	})
	if len(probs) != 2 || len(warns) != 1 {
		t.Fatalf("problems %v, warnings %v: want 2 and 1", probs, warns)
	}
	want := Problem{Path: "keys.dir", Message: writable + " has mode 0770 (group- or world-writable): another user could replace the database or the keys; run: chmod 700 " + writable}
	if probs[0] != want {
		t.Errorf("writable: got %+v\nwant %+v", probs[0], want)
	}
	if want := (Problem{Path: "data_dir", Message: notDir + " is not a directory"}); probs[1] != want {
		t.Errorf("not a directory: got %+v", probs[1])
	}
	want = Problem{Path: "keys.dir", Message: readable + " has mode 0755 (group- or world-readable): other users can list the key and database files; run: chmod 700 " + readable}
	if warns[0] != want {
		t.Errorf("readable: got %+v\nwant %+v", warns[0], want)
	}
}

func TestStateDirs(t *testing.T) {
	c := Config{DataDir: "/var/lib/cardsign", Keys: KeysConfig{Dir: "/var/lib/cardsign"}}
	if got := c.stateDirs(); len(got) != 1 || got[0] != (stateDir{"data_dir", "/var/lib/cardsign"}) {
		t.Errorf("key directory in the data directory: %v", got)
	}
	c.Keys.Dir = "/etc/cardsign/keys"
	if got := c.stateDirs(); len(got) != 2 || got[1] != (stateDir{"keys.dir", "/etc/cardsign/keys"}) {
		t.Errorf("separate key directory: %v", got)
	}
}

// The start-up check and --check-config report the same problems, located
// in the file that set the directory; readable is only a warning.
func TestCheckAndReportStateDirs(t *testing.T) {
	data := dirsWithModes(t, map[string]os.FileMode{"data": 0o777})["data"]
	cfg, path, err := loadValidated(t, "log_level: info\ndata_dir: "+data+"\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "invalid configuration:\n  " + path + ":2:1: data_dir: " + data + " has mode 0777 (group- or world-writable): another user could replace the database or the keys; run: chmod 700 " + data
	quiet := slog.New(slog.DiscardHandler)
	var ce *Error
	if err := cfg.CheckStateDirs(quiet); !errors.As(err, &ce) || err.Error() != want {
		t.Errorf("CheckStateDirs:\n%v\nwant\n%s", err, want)
	}
	if err := Check(path, io.Discard); err == nil || err.Error() != want {
		t.Errorf("Check:\n%v\nwant\n%s", err, want)
	}

	if err := os.Chmod(data, 0o750); err != nil {
		t.Fatal(err)
	}
	var out, logs bytes.Buffer
	if err := Check(path, &out); err != nil {
		t.Fatalf("readable data_dir refused: %v", err)
	}
	if !strings.HasPrefix(out.String(), "warning: data_dir: "+data+" has mode 0750") {
		t.Errorf("--check-config warning: %q", out.String())
	}
	if err := cfg.CheckStateDirs(slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "chmod 700 "+data) {
		t.Errorf("start-up warning: %q", logs.String())
	}
}
