package main

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/store/postgres"
)

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
