package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/store"
)

// TestFullDiskRecoversOnceFreed fills a real (tmpfs, root only: see
// mountTmpfs) volume with a WAL that a reader kept from being
// checkpointed, then frees space elsewhere on it. The writes that found
// it full say so (store.ErrFull); once space is back, the next write
// checkpoints and truncates the WAL before committing, so signing goes on
// instead of regrowing the WAL into the freed space until it is full
// again.
func TestFullDiskRecoversOnceFreed(t *testing.T) {
	dir := testsupport.MountTmpfs(t, "8m")
	path := filepath.Join(dir, "cardsign.db")
	s := openT(t, path)
	ctx := t.Context()
	spare := filepath.Join(dir, "spare")
	if err := os.WriteFile(spare, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	release := holdReader(t, s)
	var err error
	for range 1000 {
		if _, err = s.AppendAudit(ctx, bigRecords(20, 2000)); err != nil {
			break
		}
	}
	if !errors.Is(err, store.ErrFull) {
		t.Fatalf("appending until the volume is full: %v, want store.ErrFull", err)
	}
	release()
	grown := walSize(t, path)
	if err := os.Remove(spare); err != nil {
		t.Fatal(err)
	}
	// About 1.6 MB of records and log entries: they fit in the space
	// freed, not beside a WAL that keeps what the full volume held.
	for i := range 20 {
		if _, err := s.AppendAudit(ctx, bigRecords(20, 2000)); err != nil {
			t.Fatalf("append %d after space was freed (WAL %d bytes, %d when full): %v", i, walSize(t, path), grown, err)
		}
	}
	if n := walSize(t, path); n >= grown {
		t.Fatalf("WAL %d bytes after space came back, %d when full: never truncated", n, grown)
	}
	if _, err := s.NextSequence(ctx, "readiness-canary"); err != nil {
		t.Fatal(err)
	}
}
