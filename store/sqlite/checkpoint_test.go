package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/testsupport"
)

func walSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// bigRecords returns n audit records of about size bytes each.
func bigRecords(n, size int) []audit.Record {
	recs := make([]audit.Record, n)
	for i := range recs {
		recs[i] = record("r")
		recs[i].Signature = strings.Repeat("s", size)
	}
	return recs
}

// holdReader opens a read transaction on its own connection and keeps it
// until the returned function is called: SQLite cannot checkpoint past it,
// so the WAL grows as it does behind a long-running reader.
func holdReader(t *testing.T, s *Store) func() {
	t.Helper()
	ctx := context.Background()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// BEGIN (deferred) plus a read takes a read snapshot, not the write lock.
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM audit").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return func() {
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
		conn.Close()
	}
}

// TestOpenTruncatesWAL: a WAL left large (by a reader that blocked the
// checkpoints, or a crash) is checkpointed and truncated when the store
// opens, before the daemon serves: on a small volume that space is what the
// next append needs.
func TestOpenTruncatesWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cardsign.db")
	a := openT(t, path)
	release := holdReader(t, a)
	for range 4 {
		if _, err := a.AppendAudit(t.Context(), bigRecords(50, 2000)); err != nil {
			t.Fatal(err)
		}
	}
	release()
	if n := walSize(t, path); n < 100<<10 {
		t.Fatalf("the WAL is %d bytes: the test did not grow it", n)
	}
	// A second opening (as at a restart; the first store stays idle and
	// open, as another process would) checkpoints and truncates the WAL.
	b := openT(t, path)
	if n := walSize(t, path); n != 0 {
		t.Fatalf("after Open the WAL is still %d bytes, want 0 (PRAGMA wal_checkpoint(TRUNCATE) at open)", n)
	}
	recs, err := b.ListAudit(t.Context(), 0, 0)
	if err != nil || len(recs) != 200 {
		t.Fatalf("after the checkpoint: %d records, %v; want 200", len(recs), err)
	}
}

// TestAppendOnFullDiskTruncatesWAL fills a real (tmpfs) file system while
// the WAL holds frames a reader kept from being checkpointed. The append
// that fails for lack of space checkpoints the WAL into the database's free
// pages, truncates it, which gives its space back, and succeeds on retry.
func TestAppendOnFullDiskTruncatesWAL(t *testing.T) {
	dir := testsupport.MountTmpfs(t, "6m")
	path := filepath.Join(dir, "cardsign.db")
	s := openT(t, path)
	ctx := t.Context()
	// Free pages inside the database file: the checkpoint copies frames
	// into them without growing the file.
	for _, q := range []string{
		"CREATE TABLE scratch (b BLOB)",
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 400) INSERT INTO scratch SELECT randomblob(3500) FROM n",
		"PRAGMA wal_checkpoint(TRUNCATE)",
		"DROP TABLE scratch",
		"PRAGMA wal_checkpoint(TRUNCATE)",
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	release := holdReader(t, s)
	// A signature is written twice, in the record and in its transparency
	// log entry: these make a WAL that the free pages above can hold.
	for range 4 {
		if _, err := s.AppendAudit(ctx, bigRecords(50, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	release()
	grown := walSize(t, path)
	testsupport.FillVolume(t, filepath.Join(dir, "filler"))
	if _, err := s.AppendAudit(ctx, bigRecords(20, 2000)); err != nil {
		t.Fatalf("append on a full disk with a %d-byte WAL: %v (want: checkpoint, truncate the WAL, retry)", grown, err)
	}
	if n := walSize(t, path); n >= grown {
		t.Fatalf("WAL %d bytes after the append, was %d: not truncated", n, grown)
	}
	// Full again, with nothing left to give back: the failure names the
	// cause and the fix.
	testsupport.FillVolume(t, filepath.Join(dir, "filler2"))
	_, err := s.AppendAudit(ctx, bigRecords(200, 3000))
	if err == nil {
		t.Fatal("an append of 600 kB succeeded on a full volume")
	}
	if !strings.Contains(err.Error(), "free space") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("disk-full error does not say what to do: %v", err)
	}
	t.Logf("on a full volume: %v", err)
}
