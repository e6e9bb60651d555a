package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/pgtest"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/postgres"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/store/storecopy"
)

// cardsignd on PostgreSQL: --check-config of the store section, the way up
// from the embedded default (store copy, then the daemon on the copy), and
// a replica that cannot open the keys on record.

// pgParts splits a database URL into the URL without its password and the
// password.
func pgParts(t *testing.T, raw string) (bare, password string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	password, _ = u.User.Password()
	u.User = url.User(u.User.Username())
	return u.String(), password
}

// noLeak fails the test when out shows secret.
func noLeak(t *testing.T, what, out, secret string) {
	t.Helper()
	if secret != "" && strings.Contains(out, secret) {
		t.Errorf("%s shows the database password:\n%s", what, out)
	}
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l := loopbackListener(t)
	l.Close() // now, so that nothing listens
	return l.Addr().(*net.TCPAddr).Port
}

func TestCheckConfigStore(t *testing.T) {
	raw := newPGDatabase(t)
	bare, pw := pgParts(t, raw)
	work := t.TempDir()
	private := testsupport.WriteFileMode(t, filepath.Join(work, "pw"), pw+"\n", 0o600)
	readable := testsupport.WriteFileMode(t, filepath.Join(work, "pw-readable"), pw+"\n", 0o644)
	u, _ := url.Parse(raw)
	// docs/replicas.md's other forms of the same database: a keyword/value
	// string, and a URL for PgBouncer without prepared statements.
	dsn := fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable", u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"))
	execMode := bare + "&default_query_exec_mode=exec"
	u.Host = fmt.Sprintf("127.0.0.1:%d", closedPort(t))
	unreachable := u.String()
	storeYAML := func(url, passwordFile string) string {
		y := fmt.Sprintf("store:\n  url: %q\n", url)
		if passwordFile != "" {
			y += fmt.Sprintf("  password_file: %q\n", passwordFile)
		}
		return y
	}
	for _, tc := range []struct {
		name, yaml string
		code       int
		want       []string
	}{
		{"password file", storeYAML(bare, private), 0, []string{"store.url: connected to " + bare, "schema empty: cardsignd creates the schema", ": ok"}},
		{"password in the URL", storeYAML(raw, ""), 0, []string{"warning: store.url: carries a password", "connected to " + postgres.Redact(raw)}},
		{"keyword/value string", storeYAML(dsn, private), 0, []string{"store.url: connected to " + dsn, ": ok"}},
		{"PgBouncer without prepared statements", storeYAML(execMode, private), 0, []string{"store.url: connected to " + postgres.Redact(execMode), ": ok"}},
		{"unreachable", storeYAML(unreachable, ""), 1, []string{"c.yaml:2:3: store.url: cannot connect to " + postgres.Redact(unreachable)}},
		{"not PostgreSQL", "store:\n  url: mysql://cardsign:hunter2@db.example.com/cardsign\n", 1, []string{`c.yaml:2:3: store.url: scheme "mysql" is not postgres or postgresql`}},
		{"readable password file", storeYAML(bare, readable), 1, []string{"c.yaml:3:3: store.password_file: " + readable + " has mode 0644", "chmod 600 " + readable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "c.yaml")
			writeFile(t, cfg, tc.yaml)
			r := runDaemonOnce(t, "--check-config", cfg)
			if r.Code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", r.Code, tc.code, r.Stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Stderr, w) {
					t.Errorf("output does not say %q:\n%s", w, r.Stderr)
				}
			}
			noLeak(t, "--check-config", r.Stderr, pw)
			noLeak(t, "--check-config", r.Stderr, "hunter2")
		})
	}
	// What --check-config accepts, the daemon accepts: the keyword/value
	// string with pgx's exec mode (one parser, postgres.ParseConfig).
	accepted := filepath.Join(work, "dsn.yaml")
	writeFile(t, accepted, storeYAML(dsn+" default_query_exec_mode=exec", private))
	if r := runDaemonOnce(t, "--check-config", accepted); r.Code != 0 {
		t.Fatalf("--check-config of a keyword/value string in exec mode: exit %d\n%s", r.Code, r.Stderr)
	}
	startDaemon(t, filepath.Join(work, "dsn-data"), "--config", accepted).stop()
	// A database migrated by a newer cardsignd: refused, before any start.
	t.Run("newer schema", func(t *testing.T) {
		ctx := t.Context()
		st, err := postgres.Open(ctx, postgres.Config{URL: raw})
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		conn, err := pgx.Connect(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `INSERT INTO cardsign_schema_version (version_id, is_applied) VALUES (999, true)`); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(t.TempDir(), "c.yaml")
		writeFile(t, cfg, storeYAML(raw, ""))
		r := runDaemonOnce(t, "--check-config", cfg)
		if r.Code != 1 || !strings.Contains(r.Stderr, "schema version 999 is newer than this cardsignd supports") {
			t.Fatalf("--check-config of a newer schema: exit %d\n%s", r.Code, r.Stderr)
		}
	})
	// What --check-config refuses, the daemon refuses at start.
	cfg := filepath.Join(work, "readable.yaml")
	writeFile(t, cfg, storeYAML(bare, readable))
	r := runDaemonOnce(t, "--config", cfg, "--data-dir", filepath.Join(work, "data"), "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	if r.Code != 2 || !strings.Contains(r.Stderr, "has mode 0644") {
		t.Fatalf("start with a readable password file: exit %d\n%s", r.Code, r.Stderr)
	}
}

// freshDaemon starts cardsignd over a new data directory in a new work
// directory, and returns them with the daemon and the kid of the key it made.
func freshDaemon(t *testing.T) (work, data string, d *daemon, kid string) {
	t.Helper()
	work = t.TempDir()
	data = filepath.Join(work, "data")
	d = startDaemon(t, data)
	for k := range keyStates(t, work, d.grpc) {
		kid = k
	}
	return work, data, d, kid
}

// TestStoreCopyToPostgres is the way up from the embedded default: a daemon
// on SQLite signs, rotates and revokes; store copy moves its state to
// PostgreSQL (refusing a non-empty destination, resuming an interrupted
// copy); a daemon on the copy, in the same data directory, serves the same
// JWKS bytes, a revocation document whose sequence did not go back, and an
// audit log that verifies.
func TestStoreCopyToPostgres(t *testing.T) {
	work, data, d, first := freshDaemon(t)
	for range 3 {
		mustCLI(t, work, "sign", "--server", d.grpc, cardFile("security.json"))
	}
	rot := mustCLI(t, work, "keys", "rotate", "--prepublish", "0s", "--server", d.grpc).Stdout
	second := strings.Fields(strings.Split(rot, "\n")[1])[0]
	mustCLI(t, work, "keys", "revoke", "--", first, "--reason", "superseded: moving to PostgreSQL", "--server", d.grpc)
	mustCLI(t, work, "sign", "--server", d.grpc, cardFile("security.json"))
	const records = 7 // four signatures; the first key's creation, the rotation, the revocation
	revURL := func(d *daemon) string { return "http://" + d.http + "/.well-known/cardsign-revocations.json" }
	_, jwksBefore := httpGet(t, d.jwksURL())
	_, revBefore := httpGet(t, revURL(d))
	var seqBefore int64
	payload(t, revBefore, "sequence", &seqBefore)
	raw := newPGDatabase(t)
	bare, pw := pgParts(t, raw)
	pwFile := testsupport.WriteFileMode(t, filepath.Join(work, "db-password"), pw+"\n", 0o600)
	cfg := filepath.Join(work, "pg.yaml")
	writeFile(t, cfg, fmt.Sprintf("store:\n  url: %q\n  password_file: %q\nreplica: copied-1\n", bare, pwFile))
	// Not while the daemon runs: the copy would miss what it writes.
	if r := runDaemonOnce(t, "store", "copy", "--from", data, "--to", raw); r.Code != 1 || !strings.Contains(r.Stderr, "is running on the source") {
		t.Fatalf("store copy from a source in use: exit %d\n%s", r.Code, r.Stderr)
	}
	d.stop()
	// store.url set without the copy: refused, not a fresh start beside the
	// keys and audit log on record.
	r := runDaemonOnce(t, "--config", cfg, "--data-dir", data, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	if r.Code != 1 || !strings.Contains(r.Stderr, "cardsignd store copy --from "+filepath.Join(data, "cardsign.db")) {
		t.Fatalf("start on an empty PostgreSQL database beside an SQLite one: exit %d\n%s", r.Code, r.Stderr)
	}

	r = runDaemonOnce(t, "store", "copy", "--from", data, "--to", bare, "--password-file", pwFile)
	if r.Code != 0 || !strings.Contains(r.Stderr, fmt.Sprintf("copied 2 key records and %d audit records", records)) ||
		!strings.Contains(r.Stderr, fmt.Sprintf("verified %s: audit chain intact (%d records", bare, records)) {
		t.Fatalf("store copy: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// Again, onto the copy: refused, saying how to resume.
	r = runDaemonOnce(t, "store", "copy", "--from", data, "--to", raw)
	if r.Code != 1 || !strings.Contains(r.Stderr, "the destination is not empty") || !strings.Contains(r.Stderr, "--allow-non-empty") {
		t.Fatalf("store copy onto a non-empty destination: exit %d\n%s", r.Code, r.Stderr)
	}
	noLeak(t, "store copy", r.Stderr, pw)

	// An interrupted copy (the keys not revoked and the first two audit
	// records, as a copy stopped there leaves them) is resumed.
	raw2 := newPGDatabase(t)
	partialCopy(t, data, raw2, 2)
	// No daemon on a part-copy.
	cfg2 := filepath.Join(work, "pg2.yaml")
	writeFile(t, cfg2, fmt.Sprintf("store:\n  url: %q\n", raw2))
	r = runDaemonOnce(t, "--config", cfg2, "--data-dir", filepath.Join(work, "data2"), "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	if r.Code != 1 || !strings.Contains(r.Stderr, "store copy into") || !strings.Contains(r.Stderr, "has not finished") {
		t.Fatalf("start on a part-copy: exit %d\n%s", r.Code, r.Stderr)
	}
	r = runDaemonOnce(t, "store", "copy", "--from", filepath.Join(data, "cardsign.db"), "--to", raw2, "--allow-non-empty")
	if r.Code != 0 || !strings.Contains(r.Stderr, "resuming") || !strings.Contains(r.Stderr, fmt.Sprintf("copied 1 key record and %d audit records", records-2)) ||
		!strings.Contains(r.Stderr, "verified") {
		t.Fatalf("resuming an interrupted copy: exit %d\n%s", r.Code, r.Stderr)
	}

	// The daemon on the copy, in the same data directory.
	p := startDaemon(t, data, "--config", cfg)
	if _, jwksAfter := httpGet(t, p.jwksURL()); !bytes.Equal(jwksBefore, jwksAfter) {
		t.Errorf("JWKS changed across the copy:\n%s\n%s", jwksBefore, jwksAfter)
	}
	resp, revAfter := httpGet(t, revURL(p))
	var seqAfter int64
	payload(t, revAfter, "sequence", &seqAfter)
	if resp.StatusCode != http.StatusOK || seqAfter < seqBefore {
		t.Errorf("revocation document after the copy: status %d, sequence %d; before the copy %d", resp.StatusCode, seqAfter, seqBefore)
	}
	av := mustCLI(t, work, "audit", "verify", "--server", p.grpc, "--jwks", p.jwksURL()).Stdout
	if !strings.Contains(av, fmt.Sprintf("audit chain intact: %d records", records)) {
		t.Errorf("audit verify on PostgreSQL: %s", av)
	}
	if k := sigKIDs(t, mustCLI(t, work, "sign", "--server", p.grpc, cardFile("security.json")).Stdout); len(k) != 1 || k[0] != second {
		t.Errorf("signed on PostgreSQL by %v, want %s", k, second)
	}
	if av := mustCLI(t, work, "audit", "verify", "--server", p.grpc).Stdout; !strings.Contains(av, fmt.Sprintf("audit chain intact: %d records", records+1)) {
		t.Errorf("audit verify after signing on PostgreSQL: %s", av)
	}
	p.stop()
	if !strings.Contains(p.log.String(), bare) || !strings.Contains(p.log.String(), "replica=copied-1") {
		t.Errorf("the start-up summary does not name the database and the replica:\n%s", p.log.String())
	}
	noLeak(t, "the daemon's log", p.log.String(), pw)

	// The destination went on past the source: not an interrupted copy.
	r = runDaemonOnce(t, "store", "copy", "--from", data, "--to", raw, "--allow-non-empty")
	if r.Code != 1 || !strings.Contains(r.Stderr, "is not a part-copy") {
		t.Fatalf("resuming onto a destination that went on: exit %d\n%s", r.Code, r.Stderr)
	}
}

// TestStoreCopyRefusesErasedRevocation: a key's revocation erased from the
// keys table of a real SQLite file (someone with write access to it drops
// the trigger that forbids it) is refused by store copy, which copies
// nothing, and reported by cardsign audit verify against the daemon that
// publishes the key again: the revocation is an audit record, chained and
// logged, that the key record no longer agrees with.
func TestStoreCopyRefusesErasedRevocation(t *testing.T) {
	ctx := t.Context()
	work, data, d, first := freshDaemon(t)
	mustCLI(t, work, "keys", "rotate", "--prepublish", "0s", "--server", d.grpc)
	mustCLI(t, work, "keys", "revoke", "--", first, "--reason", "key-compromise: laptop stolen", "--server", d.grpc)
	mustCLI(t, work, "sign", "--server", d.grpc, cardFile("security.json"))
	if av := mustCLI(t, work, "audit", "verify", "--server", d.grpc).Stdout; !strings.Contains(av, "key records agree with the audit trail: 2 keys") {
		t.Fatalf("audit verify before the edit: %s", av)
	}
	d.stop()

	tamperDB(t, data, `DROP TRIGGER keys_immutable`, `UPDATE keys SET revoked_at = NULL, revoke_reason = '' WHERE kid = '`+first+`'`)

	raw := newPGDatabase(t)
	r := runDaemonOnce(t, "store", "copy", "--from", data, "--to", raw)
	if r.Code != 1 || !strings.Contains(r.Stderr, "revoked_at: the audit trail says") || !strings.Contains(r.Stderr, first) ||
		!strings.Contains(r.Stderr, "nothing was copied") {
		t.Fatalf("store copy of a source whose revocation was erased: exit %d\n%s", r.Code, r.Stderr)
	}
	dst := openPG(t, raw)
	if keys, err := dst.ListKeys(ctx); err != nil || len(keys) != 0 {
		t.Fatalf("the refused copy wrote %d key records (%v)", len(keys), err)
	}

	// The daemon on the edited file publishes the key again; audit verify
	// says its record disagrees with the trail.
	d = startDaemon(t, data)
	defer d.stop()
	r = cli(t, work, nil, "audit", "verify", "--server", d.grpc)
	if r.Code != 1 || !strings.Contains(r.Stdout, "audit chain intact") || !strings.Contains(r.Stdout, "key records DISAGREE with the audit trail") ||
		!strings.Contains(r.Stdout, "revoked_at") {
		t.Fatalf("audit verify against the edited keys table: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// partialCopy leaves at the database at to what a copy from the data
// directory from interrupted after n audit records leaves.
func partialCopy(t *testing.T, from, to string, n int64) {
	t.Helper()
	ctx := t.Context()
	src, dst, srcPath, err := openCopyStores(ctx, from, to, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer dst.Close()
	if _, err := storecopy.Copy(ctx, src, dst, storecopy.Options{Batch: 1, SourceName: srcPath, DestName: "partial", StopAfter: n}); err != nil {
		t.Fatal(err)
	}
}

// TestReplicaCannotOpenKeysMakesNone: a replica joining a store whose key
// files it cannot reach (keys.dir not on storage the replicas share) says
// so, signs nothing and makes no key of its own; it serves the same JWKS and
// revocation document as the replica that can, and recovers without a
// restart once the files are there.
func TestReplicaCannotOpenKeysMakesNone(t *testing.T) {
	raw := newPGDatabase(t)
	work := t.TempDir()
	// The replicas share one transparency-log key, as they must (the only
	// key file here that both can read).
	logKey := filepath.Join(work, "log-key.pem")
	mustCLI(t, work, "log", "key", "create", "--origin", "test.example/log", logKey)
	config := func(name, keys string) string {
		path := filepath.Join(work, name+".yaml")
		writeFile(t, path, fmt.Sprintf("store:\n  url: %q\nreplica: %s\nkeys:\n  dir: %q\nreadiness:\n  interval: 200ms\nlog:\n  origin: test.example/log\n  keys: [%q]\n",
			raw, name, keys, "file:"+logKey))
		return path
	}
	keysA, keysB := filepath.Join(work, "keys-a"), filepath.Join(work, "keys-b")
	a := startDaemon(t, filepath.Join(work, "data-a"), "--config", config("a", keysA))
	states := keyStates(t, work, a.grpc)
	if len(states) != 1 {
		t.Fatalf("first replica on an empty database: keys %v, want one", states)
	}
	var kid string
	for kid = range states {
	}
	// B cannot reach A's key files.
	if err := os.Rename(keysA, keysA+".away"); err != nil {
		t.Fatal(err)
	}
	b := startDaemon(t, filepath.Join(work, "data-b"), "--config", config("b", keysB))
	readyz(t, b, http.StatusServiceUnavailable)
	if _, body := httpGet(t, "http://"+b.http+"/readyz"); !strings.Contains(string(body), "signing key cannot be opened") {
		t.Errorf("/readyz of the replica without key files: %s", body)
	}
	if !strings.Contains(b.log.String(), "open key "+kid) {
		t.Errorf("the log does not name the key that cannot be opened (%s):\n%s", kid, b.log.String())
	}
	// UNAVAILABLE, naming the key: a client of several replicas tries
	// another, which may have the key.
	if r := cli(t, work, nil, "sign", "--server", b.grpc, cardFile("security.json")); r.Code == 0 || !strings.Contains(r.Stderr, kid) || !strings.Contains(r.Stderr, "Unavailable") {
		t.Errorf("signing on the replica without key files: exit %d\n%s", r.Code, r.Stderr)
	}
	if st := keyStates(t, work, b.grpc); len(st) != 1 || st[kid] != "active" {
		t.Errorf("keys after the second replica started: %v, want only %s", st, kid)
	}
	if files, _ := os.ReadDir(keysB); len(files) != 0 {
		t.Errorf("the second replica made key files: %v", files)
	}
	// Every replica serves the same bytes.
	revPath := "/.well-known/cardsign-revocations.json"
	for _, path := range []string{"/.well-known/jwks.json", revPath} {
		_, fromA := httpGet(t, "http://"+a.http+path)
		_, fromB := httpGet(t, "http://"+b.http+path)
		if !bytes.Equal(fromA, fromB) {
			t.Errorf("%s differs between the replicas:\n%s\n%s", path, fromA, fromB)
		}
	}
	// The key files back: B signs with the key on record, without a restart.
	if err := os.Rename(keysA+".away", keysA); err != nil {
		t.Fatal(err)
	}
	readyz(t, b, http.StatusOK)
	if k := sigKIDs(t, mustCLI(t, work, "sign", "--server", b.grpc, cardFile("security.json")).Stdout); len(k) != 1 || k[0] != kid {
		t.Errorf("signed by %v, want %s", k, kid)
	}
	a.stop()
	b.stop()
}

// TestStoreCopyKeepsRevocationCounter: a source last run by a cardsignd that
// kept no stored revocation document (before several replicas) still
// numbered the documents it served; the copy carries the counter, so the
// first document on PostgreSQL goes on above them.
func TestStoreCopyKeepsRevocationCounter(t *testing.T) {
	ctx := t.Context()
	data := filepath.Join(t.TempDir(), "data")
	startDaemon(t, data).stop()
	// What a cardsignd before stored documents leaves: a counter, no
	// document.
	srcPath := filepath.Join(data, "cardsign.db")
	tamperDB(t, data, `DELETE FROM documents`, `INSERT INTO sequences (name, value) VALUES ('revocations', 7) ON CONFLICT (name) DO UPDATE SET value = 7`)
	raw := newPGDatabase(t)
	if r := runDaemonOnce(t, "store", "copy", "--from", srcPath, "--to", raw); r.Code != 0 || !strings.Contains(r.Stderr, "sequence 7") {
		t.Fatalf("store copy: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	dst := openPG(t, raw)
	if v, err := dst.NextSequence(ctx, "revocations"); err != nil || v != 8 {
		t.Fatalf("the destination's next revocation sequence: %d, %v; want 8", v, err)
	}
}

// TestStoreCopyRegistry: store copy takes the card registry along, every
// kept version with its number, and the destination goes on numbering after
// them.
func TestStoreCopyRegistry(t *testing.T) {
	ctx := t.Context()
	data := filepath.Join(t.TempDir(), "data")
	startDaemon(t, data).stop()
	srcPath := filepath.Join(data, "cardsign.db")
	src, err := sqlite.Open(ctx, srcPath)
	if err != nil {
		t.Fatal(err)
	}
	card := func(id string, n int) store.AgentCard {
		sum := make([]byte, 32)
		sum[0] = byte(n)
		return store.AgentCard{ID: id, Visibility: store.Public, Input: []byte(fmt.Sprintf(`{"v":%d}`, n)), Options: []byte(`{}`),
			Signed: []byte(fmt.Sprintf(`{"v":%d,"signatures":[]}`, n)), CanonicalSHA256: sum, KIDs: []string{"k"}, Caller: "token:ci", AuditSeq: int64(n)}
	}
	for n := 1; n <= 3; n++ {
		if _, err := src.PutAgentCard(ctx, card("payments", n), 2); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.PutAgentCard(ctx, card("billing", 9), 0); err != nil {
		t.Fatal(err)
	}
	rev, _, err := src.RevokeCard(ctx, store.CardRevocation{CanonicalSHA256: card("payments", 1).CanonicalSHA256, AgentID: "payments", Version: 1, Reason: "leaked"},
		audit.Record{Time: time.Now(), Caller: "token:admin", Outcome: string(audit.KindCardRevoke), Reason: "leaked", CanonicalSHA256: card("payments", 1).CanonicalSHA256,
			Detail: audit.EncodeAgentDetail(audit.AgentDetail{Agent: "payments", Version: 1})})
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
	raw := newPGDatabase(t)
	if r := runDaemonOnce(t, "store", "copy", "--from", srcPath, "--to", raw); r.Code != 0 || !strings.Contains(r.Stderr, "copied the registry: 2 agents, 3 card versions, 1 revoked card") {
		t.Fatalf("store copy: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	dst := openPG(t, raw)
	hist, err := dst.AgentHistory(ctx, "payments")
	if err != nil || len(hist) != 2 || hist[0].Version != 3 || hist[1].Version != 2 || string(hist[0].Signed) != `{"v":3,"signatures":[]}` {
		t.Fatalf("payments on the destination: %+v, %v", hist, err)
	}
	if b, err := dst.AgentCard(ctx, "billing", 0); err != nil || b.Version != 1 || b.Visibility != store.Public || b.Caller != "token:ci" {
		t.Fatalf("billing on the destination: %+v, %v", b, err)
	}
	if revs, err := dst.RevokedCards(ctx); err != nil || len(revs) != 1 || revs[0].Reason != "leaked" || !revs[0].RevokedAt.Equal(rev.RevokedAt.Truncate(time.Microsecond)) {
		t.Fatalf("revoked cards on the destination: %+v, %v (source %+v)", revs, err, rev)
	}
	if next, err := dst.PutAgentCard(ctx, card("payments", 4), 0); err != nil || next.Version != 4 {
		t.Fatalf("the next version on the destination: %d, %v; want 4", next.Version, err)
	}
}

// pg is the package's PostgreSQL cluster: started by the first test that
// needs it (most tests of this package do not, and -run may pick only
// those), shared by every test after it, each with a fresh database.
// testbin.Main ends the process without returning, so no Close runs: the
// cluster's watchdog stops the server and removes its directory when the
// test binary exits, however it exits.
var pg struct {
	once    sync.Once
	cluster *pgtest.Cluster
	err     error
}

// newPGDatabase returns the URL (with the test role's password) of a fresh,
// empty database in the package's cluster.
func newPGDatabase(t *testing.T) string {
	t.Helper()
	pg.once.Do(func() {
		pg.cluster, pg.err = pgtest.Start(context.Background(), pgtest.Options{})
		if pg.err != nil {
			pg.err = fmt.Errorf("starting the tests' PostgreSQL cluster: %w", pg.err)
		}
	})
	if pg.err != nil {
		t.Fatal(pg.err)
	}
	url, err := pg.cluster.NewDatabase(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// openPG opens the PostgreSQL store at raw for the test to read what a
// command wrote there, closed when the test ends.
func openPG(t *testing.T, raw string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), postgres.Config{URL: raw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
