package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store/storetest"
)

// TestMigrateAuditWithoutPrevHashIndex: migration 5 rebuilds the audit table
// without the prev_hash index and keeps every row byte for byte, the same
// triggers as a new database, and a chain that verifies and goes on.
func TestMigrateAuditWithoutPrevHashIndex(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "cardsign.db")
	old, err := open(ctx, path, migrationsUpTo(t, 4))
	if err != nil {
		t.Fatal(err)
	}
	refused := record("refused")
	refused.Outcome, refused.Reason = audit.OutcomeRefused, "policy: name not allowed"
	refused.KID, refused.Alg, refused.Profile, refused.Signature = "", "", "", ""
	prev := audit.Genesis()
	for i, r := range []audit.Record{record("a"), record("b"), refused, record("c")} {
		// Schema 4's columns: the store's own insert names migration 6's.
		r.Seq, r.PrevHash = int64(i+1), prev
		if r.Outcome == "" {
			r.Outcome = audit.OutcomeSigned
		}
		r.Hash = r.ComputeHash(prev)
		prev = r.Hash
		if _, err := old.db.ExecContext(ctx, `INSERT INTO audit (`+auditColumns+`, outcome, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.Seq, r.Time.UnixNano(), r.Caller, r.RequestID, r.CardName, r.CardVersion, r.CanonicalSHA256,
			r.KID, r.Alg, r.Profile, r.Signature, r.PrevHash, r.Hash, r.Outcome, r.Reason); err != nil {
			t.Fatal(err)
		}
	}
	before := dumpAudit(t, old.db)
	if idx := auditIndexes(t, old.db); len(idx) != 1 {
		t.Fatalf("indexes on audit before migration 5: %v, want the prev_hash autoindex", idx)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s := openT(t, path)
	if after := dumpAudit(t, s.db); !slices.Equal(after, before) {
		t.Fatalf("rows changed by the migration:\nbefore %q\nafter  %q", before, after)
	}
	if idx := auditIndexes(t, s.db); len(idx) != 0 {
		t.Fatalf("indexes on audit after migration 5: %v, want none", idx)
	}
	fresh := openT(t, filepath.Join(t.TempDir(), "fresh.db"))
	if got, want := auditTriggers(t, s.db), auditTriggers(t, fresh.db); !slices.Equal(got, want) {
		t.Fatalf("triggers after migration:\n%q\nwant those of a new database:\n%q", got, want)
	}
	if _, err := s.AppendAudit(ctx, []audit.Record{record("d")}); err != nil {
		t.Fatal(err)
	}
	recs := storetest.ListAudit(t, s)
	if len(recs) != 5 {
		t.Fatalf("%d records, want 5", len(recs))
	}
	if err := audit.VerifyChain(audit.Genesis(), recs); err != nil {
		t.Fatal(err)
	}
	// The guards hold on the rebuilt table.
	for _, q := range []string{
		`UPDATE audit SET caller = 'x' WHERE seq = 1`,
		`DELETE FROM audit WHERE seq = 5`,
		fmt.Sprintf(`INSERT INTO audit (%s) SELECT %s FROM audit WHERE seq = 5`, auditAllColumns, auditAllColumns),
	} {
		if _, err := s.db.ExecContext(ctx, q); err == nil {
			t.Errorf("%s: succeeded on the migrated table", q)
		}
	}
}

// dumpAudit renders every audit row, every column, in seq order.
func dumpAudit(t *testing.T, db *sql.DB) []string {
	t.Helper()
	return queryColumn[string](t, db, `SELECT quote(seq)||','||quote(time)||','||quote(caller)||','||quote(request_id)||','||
		quote(card_name)||','||quote(card_version)||','||quote(canonical_sha256)||','||quote(kid)||','||quote(alg)||','||
		quote(profile)||','||quote(signature)||','||quote(prev_hash)||','||quote(hash)||','||quote(outcome)||','||quote(reason)
		FROM audit ORDER BY seq`)
}

func auditIndexes(t *testing.T, db *sql.DB) []string {
	t.Helper()
	return queryColumn[string](t, db, `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit' ORDER BY name`)
}

func auditTriggers(t *testing.T, db *sql.DB) []string {
	t.Helper()
	return queryColumn[string](t, db, `SELECT name||': '||sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'audit' ORDER BY name`)
}

// queryColumn returns the one column of q's rows.
func queryColumn[T any](t *testing.T, db *sql.DB, q string) []T {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
