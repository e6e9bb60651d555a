package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store/storetest"
)

func TestContractTampering(t *testing.T) {
	storetest.RunTampering(t, func(t *testing.T) (storetest.Opener, storetest.DeleteAuditFrom) {
		path := filepath.Join(t.TempDir(), "cardsign.db")
		return opener(path), func(ctx context.Context, from int64) error { return deleteAuditFrom(ctx, path, from) }
	})
}

// deleteAuditFrom deletes the audit records with seq >= from through a
// connection of its own, dropping the append-only trigger first, as someone
// with write access to the file could.
func deleteAuditFrom(ctx context.Context, path string, from int64) error {
	return deleteAuditWhere(ctx, path, fmt.Sprintf("seq >= %d", from))
}

// deleteAuditWhere is deleteAuditFrom for the records where says.
func deleteAuditWhere(ctx context.Context, path, where string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range []string{`DROP TRIGGER IF EXISTS audit_no_delete`, `DELETE FROM audit WHERE ` + where} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// TestMigrateAuditHead: migration 3 starts the high-water mark at the end of
// an existing log (or at genesis for an empty one), and the chain continues
// from it.
func TestMigrateAuditHead(t *testing.T) {
	ctx := t.Context()
	for _, n := range []int{0, 3} {
		t.Run(fmt.Sprintf("%d records", n), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cardsign.db")
			old, err := open(ctx, path, migrationsUpTo(t, 2))
			if err != nil {
				t.Fatal(err)
			}
			var last []audit.Record
			for i := range n {
				if last, err = old.appendBeforeHead(ctx, record(fmt.Sprint("old-", i))); err != nil {
					t.Fatal(err)
				}
			}
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			s := openT(t, path)
			wantSeq, wantHash := int64(0), audit.Genesis()
			if n > 0 {
				wantSeq, wantHash = last[0].Seq, last[0].Hash
			}
			seq, hash, err := s.AuditHead(ctx)
			if err != nil || seq != wantSeq || !bytes.Equal(hash, wantHash) {
				t.Fatalf("AuditHead after migration = %d, %x, %v; want %d, %x", seq, hash, err, wantSeq, wantHash)
			}
			out, err := s.AppendAudit(ctx, []audit.Record{record("new")})
			if err != nil || out[0].Seq != wantSeq+1 || !bytes.Equal(out[0].PrevHash, wantHash) {
				t.Fatalf("append after migration: %+v, %v", out, err)
			}
			if err := audit.VerifyChain(audit.Genesis(), storetest.ListAudit(t, s)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// appendBeforeHead appends r the way a store before migration 3 did: chained
// from the audit table's last row.
func (s *Store) appendBeforeHead(ctx context.Context, r audit.Record) ([]audit.Record, error) {
	var seq int64
	prev := audit.Genesis()
	err := s.db.QueryRowContext(ctx, `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&seq, &prev)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	r.Seq, r.PrevHash = seq+1, prev
	r.Hash = r.ComputeHash(prev)
	_, err = s.db.ExecContext(ctx, `INSERT INTO audit (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Seq, r.Time.UnixNano(), r.Caller, r.RequestID, r.CardName, r.CardVersion, r.CanonicalSHA256,
		r.KID, r.Alg, r.Profile, r.Signature, r.PrevHash, r.Hash)
	return []audit.Record{r}, err
}

// TestAuditHeadGuards: the head row cannot be moved back or deleted through
// SQL, nor can a record be inserted that does not extend it.
func TestAuditHeadGuards(t *testing.T) {
	ctx := t.Context()
	s := openT(t, filepath.Join(t.TempDir(), "cardsign.db"))
	out, err := s.AppendAudit(ctx, []audit.Record{record("a"), record("b")})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE audit_head SET seq = 1`,
		`UPDATE audit_head SET seq = seq`,
		`DELETE FROM audit_head`,
		`INSERT INTO audit_head (id, seq, hash) VALUES (2, 9, zeroblob(32))`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	r := record("c")
	r.Seq, r.PrevHash = 2, out[0].Hash // a fork after record 1
	r.Hash = r.ComputeHash(r.PrevHash)
	if _, err := s.db.ExecContext(ctx, `INSERT INTO audit (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Seq, r.Time.UnixNano(), r.Caller, r.RequestID, r.CardName, r.CardVersion, r.CanonicalSHA256,
		r.KID, r.Alg, r.Profile, r.Signature, r.PrevHash, r.Hash); err == nil || !strings.Contains(err.Error(), "does not extend") {
		t.Errorf("insert not extending the head: %v", err)
	}
	if seq, hash, err := s.AuditHead(ctx); err != nil || seq != 2 || !bytes.Equal(hash, out[1].Hash) {
		t.Fatalf("AuditHead = %d, %x, %v", seq, hash, err)
	}
}
