package postgres

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store/storetest"
)

// logMigration is the migration that made the transparency log.
const logMigration = 6

// oldDatabase makes a database as cardsign wrote it before the
// transparency log (schema 5) holding recs, and returns its URL.
func oldDatabase(t *testing.T, recs []audit.Record) string {
	t.Helper()
	ctx := t.Context()
	url := newDB(t)
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{}
	for _, name := range names[:logMigration-1] {
		b, err := fs.ReadFile(migrationFiles, name)
		if err != nil {
			t.Fatal(err)
		}
		fsys[name] = &fstest.MapFile{Data: b}
	}
	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, poolCfg, fsys, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	s := openPoolT(t, url)
	for part := range slices.Chunk(recs, 1000) {
		cols := newAuditCols(len(part))
		for i := range part {
			cols.add(&part[i], part[i].Time.UnixNano())
		}
		if _, err := s.pool.Exec(ctx, insertOldAudit, cols.args()[:16]...); err != nil {
			t.Fatalf("insert records into schema %d: %v", logMigration-1, err)
		}
	}
	return url
}

// insertOldAudit inserts records as a cardsignd of schema 5 or 6 does:
// without a detail (the first 16 of auditCols.args).
const insertOldAudit = `INSERT INTO audit (seq, time, caller, request_id, card_name, card_version, canonical_sha256, kid, alg, profile, signature, prev_hash, hash, outcome, reason, provenance)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[],
	$8::text[], $9::text[], $10::text[], $11::text[], $12::bytea[], $13::bytea[], $14::text[], $15::text[], $16::text[])`

// TestLogCatchUp: a database written before the transparency log gets its
// log when opened.
func TestLogCatchUp(t *testing.T) {
	storetest.RunLogCatchUp(t, func(t *testing.T, recs []audit.Record) (storetest.Opener, func(context.Context, string) error) {
		url := oldDatabase(t, recs)
		db := dbName(t, url)
		return opener(url), func(ctx context.Context, where string) error {
			// As the superuser, with ordinary triggers (the append-only
			// guard) off for this session, as a database administrator
			// could.
			return cluster.SuperExec(ctx, db, `SET session_replication_role = replica; DELETE FROM audit WHERE `+where)
		}
	})
}

// TestLogCatchUpLogs: the catch-up says what it does; an open with nothing
// to catch up says nothing of it.
func TestLogCatchUpLogs(t *testing.T) {
	url := oldDatabase(t, storetest.ChainedRecords(storetest.CatchUpRecords))
	storetest.RunLogCatchUpLogs(t, func(log *slog.Logger) (io.Closer, error) {
		return Open(t.Context(), Config{URL: url, Log: log})
	})
}

// TestLogGuards: the log's tables refuse, whoever sends the statement, what
// the store never does.
func TestLogGuards(t *testing.T) {
	s := openT(t, newDB(t))
	zero := `'\x` + strings.Repeat("00", 32) + `'`
	exec := func(ctx context.Context, sql string) error { _, err := s.pool.Exec(ctx, sql); return err }
	storetest.RunLogGuards(t, s, exec, []storetest.LogGuard{
		{SQL: `UPDATE log_entries SET entry = '\x00' WHERE idx = 0`, Want: "append-only"},
		{SQL: `DELETE FROM log_entries WHERE idx = 1`, Want: "append-only"},
		{SQL: `TRUNCATE log_entries`, Want: "append-only"},
		{SQL: `UPDATE log_hashes SET hash = ` + zero + ` WHERE idx = 0`, Want: "append-only"},
		{SQL: `DELETE FROM log_hashes WHERE idx = 2`, Want: "append-only"},
		{SQL: `TRUNCATE log_hashes`, Want: "append-only"},
		{SQL: `INSERT INTO log_entries (idx, entry) VALUES (2, '\x00')`, Want: "was not appended"},
		{SQL: `INSERT INTO log_entries (idx, entry) VALUES (1, '\x00')`, Want: "log_entries_pkey"},
		{SQL: `INSERT INTO log_hashes (idx, hash) VALUES (9, ` + zero + `)`, Want: "not the next indexes"},
		{SQL: `INSERT INTO log_hashes (idx, hash) VALUES (3, ` + zero + `), (5, ` + zero + `)`, Want: "not the next indexes"},
	}, func(ctx context.Context) error {
		// As the database's owner, past the trigger that refuses it.
		return cluster.SuperExec(ctx, dbName(t, s.where),
			`SET session_replication_role = replica; INSERT INTO log_entries (idx, entry) VALUES (2, '\x00')`)
	})
}

// TestAppendCatchesUpRecordsWithoutLeaves: during a rolling upgrade a
// cardsignd from before the log keeps appending records without leaves; the
// next append of this version makes them leaves first, in its transaction,
// instead of failing every signature.
func TestAppendCatchesUpRecordsWithoutLeaves(t *testing.T) {
	ctx := t.Context()
	recs := storetest.ChainedRecords(8)
	url := oldDatabase(t, recs[:5])
	s := openT(t, url)
	cols := newAuditCols(3) // as the old binary writes them: no leaves
	for i := range recs[5:] {
		cols.add(&recs[5+i], recs[5+i].Time.UnixNano())
	}
	if _, err := s.pool.Exec(ctx, insertOldAudit, cols.args()[:16]...); err != nil {
		t.Fatal(err)
	}
	storetest.CheckAppendCatchesUp(t, s)
}
