package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/storetest"
)

func TestContract(t *testing.T) { storetest.Run(t, newOpener) }

func TestContractLog(t *testing.T) { storetest.RunLog(t, newOpener) }

// newOpener opens a new database of t's.
func newOpener(t *testing.T) storetest.Opener {
	return opener(filepath.Join(t.TempDir(), "cardsign.db"))
}

// opener opens the database at path.
func opener(path string) storetest.Opener {
	return func(ctx context.Context) (store.Store, error) {
		s, err := Open(ctx, path)
		if err != nil {
			return nil, err // not a typed nil in a non-nil interface
		}
		return s, nil
	}
}

func openT(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func record(id string) audit.Record {
	return audit.Record{
		Time: time.Now(), Caller: "c", RequestID: id, CardName: "n", CardVersion: "1",
		CanonicalSHA256: make([]byte, 32), KID: "k", Alg: "ES256", Profile: "spec", Signature: "s",
	}
}

func TestFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cardsign.db")
	s := openT(t, path)
	if _, err := s.AppendAudit(t.Context(), []audit.Record{record("a")}); err != nil {
		t.Fatal(err)
	}
	// The WAL and shared-memory files hold the same data and must be as
	// private as the database.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(p), mode)
		}
	}
}

// TestPragmas checks every pooled connection, not just the first: most of
// these settings are per connection.
func TestPragmas(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "cardsign.db"))
	ctx := t.Context()
	var conns []interface{ Close() error }
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range maxOpenConns {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		for p, want := range map[string]string{"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1", "busy_timeout": "5000"} {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+p).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("connection %d: %s = %q, want %q", len(conns), p, got, want)
			}
		}
	}
}

func appliedVersions(t *testing.T, s *Store) []int {
	t.Helper()
	return queryColumn[int](t, s.db, `SELECT version FROM schema_migrations ORDER BY version`)
}

func TestMigrationsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cardsign.db")
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, m := range ms {
		want = append(want, m.version)
	}
	for i := range 3 {
		s, err := Open(t.Context(), path)
		if err != nil {
			t.Fatalf("open %d: %v", i+1, err)
		}
		if got := appliedVersions(t, s); !slices.Equal(got, want) {
			t.Errorf("open %d: applied versions %v, want %v", i+1, got, want)
		}
		if _, err := s.NextSequence(t.Context(), "opens"); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	s := openT(t, path)
	if v, err := s.NextSequence(t.Context(), "opens"); err != nil || v != 4 {
		t.Fatalf("data lost across reopens: NextSequence = %d, %v", v, err)
	}
}

func TestMigrationsConcurrentOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cardsign.db")
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := Open(t.Context(), path)
			if err == nil {
				err = s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Open: %v", err)
		}
	}
	s := openT(t, path)
	if got := appliedVersions(t, s); len(got) == 0 || got[0] != 1 {
		t.Fatalf("applied %v", got)
	}
}

func TestMigrationFailureRollsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cardsign.db")
	fsys := fstest.MapFS{
		"migrations/0001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER);`)},
		"migrations/0002_b.sql": {Data: []byte(`CREATE TABLE b (x INTEGER); INSERT INTO nosuch VALUES (1);`)},
	}
	if _, err := open(t.Context(), path, fsys); err == nil || !strings.Contains(err.Error(), "0002_b.sql") {
		t.Fatalf("open with a failing migration = %v, want an error naming it", err)
	}
	fsys["migrations/0002_b.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE b (x INTEGER);`)}
	s, err := open(t.Context(), path, fsys)
	if err != nil {
		t.Fatalf("open after fixing the migration: %v (half-applied 0002 left table b behind?)", err)
	}
	defer s.Close()
	if got := appliedVersions(t, s); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("applied %v, want [1 2]", got)
	}
}

func TestSchemaTooNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cardsign.db")
	s := openT(t, path)
	if _, err := s.db.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.Context(), path); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema = %v, want a refusal", err)
	}
}

func TestLoadMigrations(t *testing.T) {
	ok := &fstest.MapFile{Data: []byte("SELECT 1;")}
	tests := []struct {
		name  string
		files []string
		want  []int // nil: error
	}{
		{"ordered numerically", []string{"0010_j.sql", "0002_b.sql", "0001_a.sql", "3_c.sql", "4_d.sql", "5_e.sql", "6_f.sql", "7_g.sql", "8_h.sql", "9_i.sql"}, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"gap", []string{"0001_a.sql", "0003_c.sql"}, nil},
		{"repeat", []string{"0001_a.sql", "0001_b.sql"}, nil},
		{"starts at 2", []string{"0002_a.sql"}, nil},
		{"no number", []string{"init.sql"}, nil},
		{"zero", []string{"0000_a.sql", "0001_b.sql"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range tt.files {
				fsys["migrations/"+f] = ok
			}
			ms, err := loadMigrations(fsys)
			if tt.want == nil {
				if err == nil {
					t.Fatalf("loadMigrations accepted %v", tt.files)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.version)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("versions %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := loadMigrations(migrationFiles); err != nil {
		t.Fatalf("embedded migrations: %v", err)
	}
}

// TestSchemaGuards writes to the file behind the store's back, as a buggy
// tool or careless operator would: the schema itself refuses.
func TestSchemaGuards(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "cardsign.db"))
	ctx := t.Context()
	out, err := s.AppendAudit(ctx, []audit.Record{record("a"), record("b")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateKey(ctx, storetest.NewKey(t, "k1", time.Now()), nil); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO audit (` + auditColumns + `) VALUES (?, 0, '', '', '', '', zeroblob(32), '', '', '', '', ?, randomblob(32))`
	tests := []struct {
		name string
		sql  string
		args []any
	}{
		{"update audit", `UPDATE audit SET caller = 'x' WHERE seq = 1`, nil},
		{"delete audit", `DELETE FROM audit WHERE seq = 2`, nil},
		{"fork the chain", insert, []any{3, out[0].Hash}},
		{"skip a seq", insert, []any{4, out[1].Hash}},
		{"reuse a seq", insert, []any{2, out[0].Hash}},
		{"seq 0", insert, []any{0, make([]byte, 32)}},
		{"short hash", `INSERT INTO audit (` + auditColumns + `) VALUES (3, 0, '', '', '', '', zeroblob(32), '', '', '', '', ?, zeroblob(31))`, []any{out[1].Hash}},
		{"delete key", `DELETE FROM keys WHERE kid = 'k1'`, nil},
		{"change key uri", `UPDATE keys SET uri = 'file:/evil' WHERE kid = 'k1'`, nil},
		{"change key jwk", `UPDATE keys SET public_jwk = '{}' WHERE kid = 'k1'`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.db.ExecContext(ctx, tt.sql, tt.args...); err == nil {
				t.Fatalf("%s succeeded", tt.sql)
			}
		})
	}
	// A correct extension still goes in.
	if _, err := s.db.ExecContext(ctx, insert, 3, out[1].Hash); err != nil {
		t.Fatalf("valid raw insert refused: %v", err)
	}
	// Un-revoking through SQL is refused too.
	if _, err := s.db.ExecContext(ctx, `UPDATE keys SET revoked_at = 1 WHERE kid = 'k1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE keys SET revoked_at = NULL WHERE kid = 'k1'`); err == nil {
		t.Fatal("un-revoking through SQL succeeded")
	}
}

func TestAwkwardPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir?with#odd%chars")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c?d#e%20f.db")
	s := openT(t, path)
	if _, err := s.NextSequence(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at the path given: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "c?d#e%20f.db") {
			t.Errorf("stray file %q: path misparsed", e.Name())
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(t.Context(), filepath.Join(dir, "missing", "cardsign.db")); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
	notDB := filepath.Join(dir, "not.db")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.Context(), notDB); err == nil {
		t.Error("Open of a non-database file succeeded")
	}
}

// The helper process: when CARDSIGN_STORE_HELPER is set, this test binary
// appends audit records to the store named there and prints each committed
// seq, standing in for a second cardsignd.
const helperEnv = "CARDSIGN_STORE_HELPER"
