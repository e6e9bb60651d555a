package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cardsign/cardsign/store/sqlite"
)

// TestReadyzSaysDiskFull: the embedded database on a real small volume
// (a tmpfs: root only, as CI runs it; elsewhere the test says it skipped)
// that fills up: /readyz says "disk full"; once space is freed the next
// check writes again (the WAL checkpointed and truncated first) and the
// authority is ready and signs.
func TestReadyzSaysDiskFull(t *testing.T) {
	cantRun := t.Skipf
	if os.Getenv("CI") != "" {
		cantRun = t.Fatalf
	}
	if os.Geteuid() != 0 {
		cantRun("needs root to mount a small tmpfs (CI runs it as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		cantRun("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "cardsign.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := newAuthorityOn(t, st, t.TempDir())
	if err := a.CheckReadiness(ctx); err != nil {
		t.Fatal(err)
	}
	// An empty WAL, then no space: the canary's durable write must grow it.
	if err := st.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	fillVolume(t, filler)
	if err := a.CheckReadiness(ctx); err == nil {
		t.Fatal("ready with the database's volume full")
	}
	h := NewHTTPHandler(a, HTTPOptions{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"disk full"`) {
		t.Fatalf("/readyz with the volume full: %d %s", rec.Code, rec.Body)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckReadiness(ctx); err != nil {
		t.Fatalf("space freed: %v", err)
	}
	data, err := os.ReadFile("../testdata/cards/divergent.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Sign(ctx, SignRequest{Card: data}); err != nil {
		t.Fatalf("signing once space was freed: %v", err)
	}
}

// fillVolume writes path until its file system has no space left.
func fillVolume(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{64 << 10, 4 << 10, 512} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
}
