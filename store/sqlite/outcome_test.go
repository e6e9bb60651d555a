package sqlite

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/cardsign/cardsign/audit"
)

// migrationsUpTo returns the embedded migrations up to version n, as an
// older cardsign shipped them.
func migrationsUpTo(t *testing.T, n int) fstest.MapFS {
	t.Helper()
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{}
	for _, m := range ms[:n] {
		b, err := fs.ReadFile(migrationFiles, "migrations/"+m.name)
		if err != nil {
			t.Fatal(err)
		}
		fsys["migrations/"+m.name] = &fstest.MapFile{Data: b}
	}
	return fsys
}

// TestMigrateOutcomeKeepsChain builds a database with migration 1 only, as
// cardsign wrote it before outcomes existed, fills it with records through
// migration 1's columns, then opens it normally: migration 2 must apply, the
// old records must read back as signed with their hashes unchanged, and the
// chain must verify and continue with refused and signed records.
func TestMigrateOutcomeKeepsChain(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "cardsign.db")
	old, err := open(ctx, path, migrationsUpTo(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := appliedVersions(t, old); !slices.Equal(got, []int{1}) {
		t.Fatalf("old database has versions %v, want [1]", got)
	}
	var oldRecs []audit.Record
	prev := audit.Genesis()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for i := range 5 {
		sum := sha256.Sum256(fmt.Appendf(nil, "card %d", i))
		r := audit.Record{
			Seq: int64(i + 1), Time: t0.Add(time.Duration(i) * time.Second), Caller: "c", RequestID: fmt.Sprint("old-", i),
			CardName: "n", CardVersion: "1", CanonicalSHA256: sum[:], KID: "k", Alg: "ES256", Profile: "spec", Signature: "s",
			PrevHash: prev,
		}
		r.Hash = r.ComputeHash(prev)
		prev = r.Hash
		if _, err := old.db.ExecContext(ctx, `INSERT INTO audit (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.Seq, r.Time.UnixNano(), r.Caller, r.RequestID, r.CardName, r.CardVersion, r.CanonicalSHA256,
			r.KID, r.Alg, r.Profile, r.Signature, r.PrevHash, r.Hash); err != nil {
			t.Fatalf("insert into the old schema: %v", err)
		}
		oldRecs = append(oldRecs, r)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s := openT(t, path)
	// Later migrations apply too; this test is about 1 and 2.
	if got, want := appliedVersions(t, s), []int{1, 2}; !slices.Equal(got[:min(len(got), 2)], want) {
		t.Fatalf("after Open: versions %v, want %v first", got, want)
	}
	recs, err := s.ListAudit(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.VerifyChain(audit.Genesis(), recs); err != nil {
		t.Fatalf("old chain after migration: %v", err)
	}
	if len(recs) != len(oldRecs) {
		t.Fatalf("%d records after migration, want %d", len(recs), len(oldRecs))
	}
	for i, r := range recs {
		if r.Outcome != audit.OutcomeSigned || r.Reason != "" {
			t.Errorf("old record %d reads back with outcome %q reason %q, want signed and none", r.Seq, r.Outcome, r.Reason)
		}
		if !bytes.Equal(r.Hash, oldRecs[i].Hash) || !bytes.Equal(r.PrevHash, oldRecs[i].PrevHash) {
			t.Errorf("old record %d: hash changed", r.Seq)
		}
	}

	// The chain continues: refused and signed records after the old ones.
	refused := record("refused")
	refused.KID, refused.Alg, refused.Profile, refused.Signature = "", "", "", ""
	refused.Outcome, refused.Reason = audit.OutcomeRefused, "host policy: c may not sign for evil.example"
	out, err := s.AppendAudit(ctx, []audit.Record{refused, record("new")})
	if err != nil {
		t.Fatalf("append after migration: %v", err)
	}
	if out[0].Seq != 6 || !bytes.Equal(out[0].PrevHash, oldRecs[4].Hash) {
		t.Fatalf("first new record: seq %d prev %x", out[0].Seq, out[0].PrevHash)
	}
	if out[1].Outcome != audit.OutcomeSigned {
		t.Errorf("empty outcome stored as %q, want signed", out[1].Outcome)
	}
	recs, err = s.ListAudit(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.VerifyChain(audit.Genesis(), recs); err != nil {
		t.Fatalf("mixed chain: %v", err)
	}
	if len(recs) != 7 || recs[5].Outcome != audit.OutcomeRefused || recs[5].Reason != refused.Reason || recs[6].Outcome != audit.OutcomeSigned {
		t.Fatalf("after appends: %+v", recs)
	}
}

// TestSchemaGuardsOutcome writes outcome columns behind the store's back: the
// schema refuses what AppendAudit would.
func TestSchemaGuardsOutcome(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "cardsign.db"))
	ctx := t.Context()
	out, err := s.AppendAudit(ctx, []audit.Record{record("a")})
	if err != nil {
		t.Fatal(err)
	}
	head := out[0].Hash
	insert := `INSERT INTO audit (` + auditColumns + `, outcome, reason) VALUES (2, 0, '', '', '', '', zeroblob(32), ?, '', '', ?, ?, randomblob(32), ?, ?)`
	tests := []struct {
		name                      string
		kid, sig, outcome, reason string
	}{
		{"unknown outcome", "k", "s", "denied", ""},
		{"empty outcome", "k", "s", "", ""},
		{"signed with a reason", "k", "s", "signed", "why"},
		{"refused with a kid", "k", "", "refused", "why"},
		{"refused with a signature", "", "s", "refused", "why"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.db.ExecContext(ctx, insert, tt.kid, tt.sig, head, tt.outcome, tt.reason); err == nil {
				t.Fatal("insert succeeded")
			}
		})
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE audit SET outcome = 'refused' WHERE seq = 1`); err == nil {
		t.Fatal("updating an outcome succeeded")
	}
	// A well-formed refused row goes in.
	if _, err := s.db.ExecContext(ctx, insert, "", "", head, "refused", "why"); err != nil {
		t.Fatalf("valid raw refused insert refused: %v", err)
	}
}
