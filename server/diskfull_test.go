package server

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/store/sqlite"
)

// TestReadyzSaysDiskFull: the embedded database on a real small volume
// (a tmpfs: root only, as CI runs it; elsewhere the test says it skipped)
// that fills up: /readyz says "disk full"; once space is freed the next
// check writes again (the WAL checkpointed and truncated first) and the
// authority is ready and signs.
func TestReadyzSaysDiskFull(t *testing.T) {
	dir := testsupport.MountTmpfs(t, "8m")
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
	testsupport.FillVolume(t, filler)
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
