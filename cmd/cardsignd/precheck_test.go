package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/store/postgres"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/transparency"
)

// olderSQLite makes the embedded database of an older cardsignd in dir:
// the migrations before the last one, and one key on record, active,
// whose URI names uri; and the documents in docs (name: body).
func olderSQLite(t *testing.T, dir, uri string, docs map[string]string) string {
	t.Helper()
	files, err := filepath.Glob("../../store/sqlite/migrations/*.sql")
	if err != nil || len(files) < 2 {
		t.Fatalf("migrations: %v %v", files, err)
	}
	sort.Strings(files)
	files = files[:len(files)-1]
	path := filepath.Join(dir, sqliteFile)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`PRAGMA journal_mode = WAL`)
	exec(`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT`)
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		exec(string(b))
		exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, i+1)
	}
	pub := publicJWK(t, "k1")
	at := time.Now().Add(-time.Hour).UnixNano()
	exec(`INSERT INTO keys (kid, uri, alg, public_jwk, created_at, publish_at, activate_at) VALUES ('k1', ?, 'ES256', ?, ?, ?, ?)`, uri, pub, at, at, at)
	for name, body := range docs {
		exec(`INSERT INTO documents (name, seq, body, meta, updated_at) VALUES (?, 1, ?, x'', ?)`, name, []byte(body), at)
	}
	return path
}

// A key on record whose backend the config lacks: --check-config reports
// it, and the start refuses it before opening the database, so an older
// schema is left unmigrated (the file byte-identical).
func TestRefusedStartLeavesOlderSchema(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	olderSQLite(t, data, "pkcs11:token=cardsign;object=k1", nil)
	before := snapshot(t, data)
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	writeFile(t, cfg, fmt.Sprintf("data_dir: %q\n", data))
	want := "key k1 (active) on record uses the pkcs11 backend, which is not configured"
	for _, args := range [][]string{{"--check-config", cfg}, {"--config", cfg, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}} {
		r := runDaemonOnce(t, args...)
		if r.Code != 1 || !strings.Contains(r.Stderr, want) {
			t.Errorf("%s: exit %d, want 1 and %q\n%s", args[0], r.Code, want, r.Stderr)
		}
		sameTree(t, args[0], before, snapshot(t, data))
	}
}

// Log keys that share none with those the replica that started last
// recorded: the start refuses them before opening the database, so an
// older schema is left unmigrated.
func TestRefusedLogKeysLeaveOlderSchema(t *testing.T) {
	work := t.TempDir()
	data := filepath.Join(work, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(work, "mine.pem")
	mustCLI(t, work, "log", "key", "create", "--origin", "test.example/log", mine)
	theirs := filepath.Join(work, "theirs.pem")
	mustCLI(t, work, "log", "key", "create", "--origin", "test.example/log", theirs)
	// What the other replica recorded: the origin and its key's name, as
	// transparency.CheckSharedKeys writes them (the name read from a start on a
	// scratch store under the other key).
	scratch := filepath.Join(work, "scratch")
	cfgTheirs := filepath.Join(work, "theirs.yaml")
	writeFile(t, cfgTheirs, fmt.Sprintf("log:\n  origin: test.example/log\n  keys: [%q]\n", "file:"+theirs))
	d := startDaemon(t, scratch, "--config", cfgTheirs)
	d.stop()
	c, err := sqlite.Inspect(t.Context(), filepath.Join(scratch, sqliteFile), transparency.KeysDocument)
	if err != nil || len(c.Documents[transparency.KeysDocument].Body) == 0 {
		t.Fatalf("the log keys recorded on the scratch store: %v", err)
	}
	olderSQLite(t, data, "file:"+filepath.Join(data, "keys", "k1.pem"), map[string]string{transparency.KeysDocument: string(c.Documents[transparency.KeysDocument].Body)})
	before := snapshot(t, data)
	cfg := filepath.Join(work, "mine.yaml")
	writeFile(t, cfg, fmt.Sprintf("data_dir: %q\nlog:\n  origin: test.example/log\n  keys: [%q]\n", data, "file:"+mine))
	r := runDaemonOnce(t, "--config", cfg, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	if r.Code != 1 || !strings.Contains(r.Stderr, "none of this replica's keys") {
		t.Errorf("start with another log key: exit %d\n%s", r.Code, r.Stderr)
	}
	sameTree(t, "refused start", before, snapshot(t, data))
}

// On PostgreSQL too: a key on record whose backend the config lacks is
// reported by --check-config and refused by the start before it opens the
// database, which gets no log key and no first key of its own.
func TestCheckConfigRefusesKeyBackendPostgres(t *testing.T) {
	raw, conn := migratedPG(t)
	pub := publicJWK(t, "k1")
	at := time.Now().Add(-time.Hour).UnixNano()
	_, err := conn.Exec(t.Context(), `INSERT INTO keys (kid, uri, alg, public_jwk, created_at, publish_at, activate_at) VALUES ('k1', $1, 'ES256', $2, $3, $3, $3)`,
		"awskms:///arn:aws:kms:eu-west-1:111122223333:key/k1", pub, at)
	conn.Close(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	writeFile(t, cfg, fmt.Sprintf("data_dir: %q\nstore:\n  url: %q\n", data, raw))
	want := "key k1 (active) on record uses the awskms backend, which is not configured"
	for _, args := range [][]string{{"--check-config", cfg}, {"--config", cfg, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}} {
		r := runDaemonOnce(t, args...)
		if r.Code != 1 || !strings.Contains(r.Stderr, want) {
			t.Errorf("%s: exit %d, want 1 and %q\n%s", args[0], r.Code, want, r.Stderr)
		}
	}
	c, err := postgres.Inspect(t.Context(), postgres.Config{URL: raw}, transparency.KeysDocument)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Documents[transparency.KeysDocument]; ok || c.Keys != 1 {
		t.Errorf("the refused start wrote: log keys recorded %v, %d key records", ok, c.Keys)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("the refused start made %s (%v)", data, err)
	}
}

// publicJWK is the public JWK (JSON) of a fresh P-256 key named kid, the
// shape a key row on record holds.
func publicJWK(t *testing.T, kid string) string {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := jose.NewJWK(priv.Public(), kid, jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := jwk.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(pub)
}

// migratedPG is a fresh PostgreSQL database with every migration applied
// and a connection to it that the caller closes, for tests that then
// write rows or roll the schema back behind the daemon's back.
func migratedPG(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	raw := newPGDatabase(t)
	st, err := postgres.Open(t.Context(), postgres.Config{URL: raw})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	conn, err := pgx.Connect(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	return raw, conn
}

// startRefusedByReplicaName starts cardsignd with config cfg under a
// replica name whose lease the test holds, and once the start says it
// waits for that lease, checks unchanged() (nothing migrated so far),
// renews the lease with renew() as a live holder would, and requires the
// start refused with ClaimReplica's error.
func startRefusedByReplicaName(t *testing.T, cfg string, unchanged func(when string), renew func()) {
	t.Helper()
	cmd := exec.Command(daemonBin, "--config", cfg, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	log := &testsupport.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	})
	const waiting = "replica name held by another process"
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(log.String(), waiting) {
		select {
		case err := <-exited:
			t.Fatalf("cardsignd exited (%v) before waiting for the replica name\n%s", err, log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("cardsignd did not wait for the replica name\n%s", log.String())
		}
	}
	unchanged("while the start waits for the name")
	renew()
	select {
	case err := <-exited:
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(log.String(), `r1\" is in use by another live cardsignd (instance other/1/abc`) &&
			!strings.Contains(log.String(), `r1" is in use by another live cardsignd (instance other/1/abc`) {
			t.Errorf("start under a live replica name: %v (exit %d)\n%s", err, code, log.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("cardsignd not refused after the lease was renewed\n%s", log.String())
	}
	unchanged("after the refused start")
}

// A configured replica name that a live process holds refuses the start
// before the store is opened: a SQLite database one migration behind is
// left byte-identical. The live holder is the test, renewing the lease
// row (by replacing the file whole, so the start never reads it half
// written).
func TestReplicaNameRefusedLeavesOlderSQLite(t *testing.T) {
	work := t.TempDir()
	data := filepath.Join(work, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	path := olderSQLite(t, data, "file:"+filepath.Join(data, "keys", "k1.pem"), nil)
	setLease := func(expires time.Time) {
		next := filepath.Join(work, "next.db")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, next, string(b))
		db, err := sql.Open("sqlite", "file:"+next)
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Exec(`INSERT INTO leases (name, holder, epoch, expires_at) VALUES ('replica/r1', 'other/1/abc', 1, ?)
			ON CONFLICT (name) DO UPDATE SET expires_at = excluded.expires_at`, expires.UnixNano())
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(next, path); err != nil {
			t.Fatal(err)
		}
	}
	setLease(time.Now().Add(10 * time.Minute))
	before := snapshot(t, data)
	cfg := filepath.Join(work, "c.yaml")
	writeFile(t, cfg, fmt.Sprintf("data_dir: %q\nreplica: r1\n", data))
	startRefusedByReplicaName(t, cfg, func(when string) {
		after := snapshot(t, data)
		sameTree(t, when, before, after)
		if t.Failed() {
			t.FailNow()
		}
	}, func() {
		setLease(time.Now().Add(20 * time.Minute))
		before = snapshot(t, data)
	})
}

// On PostgreSQL: a database one migration behind, the replica name's
// lease renewed by the test; the start is refused and the schema version
// is unchanged.
func TestReplicaNameRefusedLeavesOlderPostgres(t *testing.T) {
	raw, conn := migratedPG(t)
	defer conn.Close(t.Context())
	run := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(t.Context(), q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	// One migration behind: the newest migration's Down applied and its
	// version row removed.
	files, err := filepath.Glob("../../store/postgres/migrations/*.sql")
	if err != nil || len(files) < 2 {
		t.Fatalf("migrations: %v %v", files, err)
	}
	b, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	_, down, ok := strings.Cut(string(b), "-- +goose Down")
	if !ok {
		t.Fatalf("%s has no Down section", files[len(files)-1])
	}
	run(down)
	run(`DELETE FROM cardsign_schema_version WHERE version_id = $1`, len(files))
	version := func() int64 {
		t.Helper()
		s, err := postgres.CheckSchema(t.Context(), postgres.Config{URL: raw})
		if err != nil {
			t.Fatal(err)
		}
		return s.Current
	}
	if v := version(); v != int64(len(files)-1) {
		t.Fatalf("schema version %d, want %d", v, len(files)-1)
	}
	run(`INSERT INTO leases (name, holder, epoch, expires_at) VALUES ('replica/r1', 'other/1/abc', 1, now() + interval '10 minutes')`)
	data := filepath.Join(t.TempDir(), "data")
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	writeFile(t, cfg, fmt.Sprintf("data_dir: %q\nreplica: r1\nstore:\n  url: %q\n", data, raw))
	startRefusedByReplicaName(t, cfg, func(when string) {
		if v := version(); v != int64(len(files)-1) {
			t.Fatalf("%s: schema version %d, want %d (migrated)", when, v, len(files)-1)
		}
	}, func() {
		run(`UPDATE leases SET expires_at = now() + interval '20 minutes' WHERE name = 'replica/r1'`)
	})
}
