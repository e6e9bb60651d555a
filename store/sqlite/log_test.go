package sqlite

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store/storetest"
)

// logMigration is the migration that made the transparency log.
const logMigration = 9

// insertOldAudit inserts a record as a cardsignd of schema 8 or 9 does:
// without a detail.
const insertOldAudit = `INSERT INTO audit (` + auditColumns + `, outcome, reason, provenance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// TestLogCatchUp: a database written before the transparency log
// (schema 8) gets its log when opened.
func TestLogCatchUp(t *testing.T) {
	storetest.RunLogCatchUp(t, func(t *testing.T, recs []audit.Record) (storetest.Opener, func(context.Context, string) error) {
		path := oldDatabase(t, recs)
		return opener(path), func(ctx context.Context, where string) error { return deleteAuditWhere(ctx, path, where) }
	})
}

// oldDatabase is a database at the schema before the transparency log,
// holding recs.
func oldDatabase(t *testing.T, recs []audit.Record) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cardsign.db")
	ctx := t.Context()
	old, err := open(ctx, path, migrationsUpTo(t, logMigration-1))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	tx, err := old.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, r := range recs {
		if _, err := tx.ExecContext(ctx, insertOldAudit, r.Seq, r.Time.UnixNano(), r.Caller, r.RequestID, r.CardName, r.CardVersion,
			r.CanonicalSHA256, r.KID, r.Alg, r.Profile, r.Signature, r.PrevHash, r.Hash, r.Outcome, r.Reason, r.Provenance); err != nil {
			t.Fatalf("insert record %d into schema %d: %v", r.Seq, logMigration-1, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLogCatchUpLogs: making old records leaves at open is reported, with
// progress, to the logger OpenWith is given; an open with nothing to do says
// nothing.
func TestLogCatchUpLogs(t *testing.T) {
	path := oldDatabase(t, storetest.ChainedRecords(storetest.CatchUpRecords))
	storetest.RunLogCatchUpLogs(t, func(log *slog.Logger) (io.Closer, error) {
		return OpenWith(t.Context(), path, Options{Log: log})
	})
}

// TestLogGuards: the log's tables refuse, whoever writes to the file,
// what the store never does.
func TestLogGuards(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "cardsign.db"))
	exec := func(ctx context.Context, sql string) error { _, err := s.db.ExecContext(ctx, sql); return err }
	storetest.RunLogGuards(t, s, exec, []storetest.LogGuard{
		{SQL: `UPDATE log_entries SET entry = x'00' WHERE idx = 0`, Want: "append-only"},
		{SQL: `DELETE FROM log_entries WHERE idx = 1`, Want: "append-only"},
		{SQL: `UPDATE log_hashes SET hash = zeroblob(32) WHERE idx = 0`, Want: "append-only"},
		{SQL: `DELETE FROM log_hashes WHERE idx = 2`, Want: "append-only"},
	}, func(ctx context.Context) error {
		return exec(ctx, `INSERT INTO log_entries (idx, entry) VALUES (2, x'00')`)
	})
}

// TestAppendCatchesUpRecordsWithoutLeaves: during a rolling upgrade a
// cardsignd from before the log keeps appending records without leaves; the
// next append of this version makes them leaves first, in its transaction,
// instead of failing every signature.
func TestAppendCatchesUpRecordsWithoutLeaves(t *testing.T) {
	ctx := t.Context()
	recs := storetest.ChainedRecords(8)
	path := oldDatabase(t, recs[:5])
	s := openT(t, path)
	for _, r := range recs[5:] { // as the old binary writes them: no leaves
		if _, err := s.db.ExecContext(ctx, insertOldAudit, r.Seq, r.Time.UnixNano(), r.Caller, r.RequestID, r.CardName, r.CardVersion,
			r.CanonicalSHA256, r.KID, r.Alg, r.Profile, r.Signature, r.PrevHash, r.Hash, r.Outcome, r.Reason, r.Provenance); err != nil {
			t.Fatal(err)
		}
	}
	storetest.CheckAppendCatchesUp(t, s)
}
