package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "modernc.org/sqlite" // the driver the store uses: openStoreDB

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/transparency"
)

// logCard is a valid card named name whose interface is on host.
func logCard(name, host string) []byte {
	return []byte(`{"name":"` + name + `","description":"d","supportedInterfaces":[{"url":"https://` + host + `/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)
}

// TestTransparencyLogUnderLoad: every card a loaded cardsignd returns carries,
// for each signature, an inclusion proof that the log key (served beside the
// JWKS) vouches for; the JS SDK verifies such cards; a card stripped of its
// proof verifies only without --log-key; full tiles are served immutable and
// byte-stable.
func TestTransparencyLogUnderLoad(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cardsignd.yaml")
	writeFile(t, cfg, "limits: {rate: 0}\n")
	d := startDaemon(t, filepath.Join(dir, "data"), "--config", cfg)
	if !strings.Contains(d.log.String(), "made the transparency log's key") {
		t.Fatalf("no log key made at the first start:\n%s", d.log.String())
	}
	key, err := os.Stat(filepath.Join(dir, "data", "keys", "transparency-log.pem"))
	if err != nil || key.Mode().Perm() != 0o600 {
		t.Fatalf("log key file: %v %v", key, err)
	}
	c := dialDaemon(t, d.grpc)
	const workers, each = 16, 20
	cards := make([][]byte, workers*each)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				res, err := c.SignCard(t.Context(), &pb.SignCardRequest{Card: logCard(fmt.Sprint("agent-", n), fmt.Sprintf("a%d.example.com", n))})
				if err != nil {
					errs <- err
					return
				}
				cards[n] = res.GetSignedCard()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	resp, body := httpGet(t, "http://"+d.http+transparency.KeyPath)
	if resp.StatusCode != 200 {
		t.Fatalf("log key: %d", resp.StatusCode)
	}
	logKeys, err := transparency.ParseVerifierKeys(string(body))
	if err != nil {
		t.Fatal(err)
	}
	_, jwksBody := httpGet(t, d.jwksURL())
	trusted, err := jwks.Parse(jwksBody)
	if err != nil {
		t.Fatal(err)
	}
	leaves := map[int64]bool{}
	signatures := 0
	for n, card := range cards {
		v, err := signer.Verify(t.Context(), card, signer.VerifyOptions{Trusted: trusted, LogKeys: logKeys, RequireLog: true})
		if err != nil || !v.Valid(true) {
			t.Fatalf("card %d: %+v %v", n, v, err)
		}
		signatures += len(v.Checks)
		for _, ch := range v.Checks {
			if leaves[ch.Logged.Index] {
				t.Fatalf("card %d: leaf %d proves two signatures", n, ch.Logged.Index)
			}
			leaves[ch.Logged.Index] = true
		}
	}
	if len(leaves) != signatures {
		t.Fatalf("%d leaves for %d signatures", len(leaves), signatures)
	}

	// The shipped JS verifier, and the CLI with and without the log key.
	jwksFile := filepath.Join(dir, "jwks.json")
	writeFile(t, jwksFile, string(jwksBody))
	var files []string
	for i := 0; i < len(cards); i += 37 {
		f := filepath.Join(dir, fmt.Sprintf("card%d.json", i))
		writeFile(t, f, string(cards[i]))
		files = append(files, f)
	}
	verifyJS(t, jwksFile, files...)
	keyURL := "http://" + d.http + transparency.KeyPath
	out := mustCLI(t, dir, "verify", "--jwks", d.jwksURL(), "--log-key", keyURL, files[0])
	if !strings.Contains(out.Stdout, "logged: cardsign.localhost/log leaf") {
		t.Fatalf("verify --log-key:\n%s", out.Stdout)
	}
	stripped := filepath.Join(dir, "stripped.json")
	writeFile(t, stripped, string(stripProofs(t, cards[0])))
	mustCLI(t, dir, "verify", "--jwks", d.jwksURL(), stripped)
	verifyJS(t, jwksFile, stripped)
	if r := cli(t, dir, nil, "verify", "--jwks", d.jwksURL(), "--log-key", keyURL, stripped); r.Code != 1 || !strings.Contains(r.Stdout, "no transparency-log inclusion proof") {
		t.Fatalf("a card without proofs passed --log-key: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// 320 cards, two signatures each: tile 0 of level 0 is full, immutable and byte-stable.
	tileURL := "http://" + d.http + transparency.PathPrefix + "tile/0/000"
	r1, t1 := httpGet(t, tileURL)
	if r1.StatusCode != 200 || len(t1) != 256*32 || !strings.Contains(r1.Header.Get("Cache-Control"), "immutable") {
		t.Fatalf("full tile: %d, %d bytes, %q", r1.StatusCode, len(t1), r1.Header.Get("Cache-Control"))
	}
	if _, err := c.SignCard(t.Context(), &pb.SignCardRequest{Card: logCard("later", "later.example.com")}); err != nil {
		t.Fatal(err)
	}
	if _, t2 := httpGet(t, tileURL); string(t2) != string(t1) {
		t.Fatal("a full tile changed after more leaves were appended")
	}
	d.stop()
}

// stripProofs removes every signature's unprotected header.
func stripProofs(t *testing.T, card []byte) []byte {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal(card, &c); err != nil {
		t.Fatal(err)
	}
	for _, s := range c["signatures"].([]any) {
		delete(s.(map[string]any), "header")
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tamperDB runs statements on the daemon's SQLite database behind its back,
// as someone with write access to the file could.
func tamperDB(t *testing.T, dataDir string, stmts ...string) {
	t.Helper()
	db := openStoreDB(t, dataDir)
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// openStoreDB opens the SQLite database of the daemon whose data directory
// is dataDir, behind the daemon's back, as someone with write access to the
// file could; the caller closes it.
func openStoreDB(t *testing.T, dataDir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dataDir, "cardsign.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestTransparencyLogTampering: a record, an entry or a stored tree hash
// (what tiles and checkpoints are made of) changed in the database is found
// by audit verify --log; the monitor and log verify raise an alarm (exit 3)
// for a tree that no longer extends the one they saw, and the monitor's
// state does not move.
func TestTransparencyLogTampering(t *testing.T) {
	tests := []struct {
		name    string
		stmts   []string
		audit   string // what audit verify --log says
		monitor bool   // whether the monitor raises an alarm (its new leaves are 6 to 11)
		verify  bool   // whether log verify raises one (the tree itself changed)
	}{
		{"record", []string{`DROP TRIGGER IF EXISTS audit_no_update`, `UPDATE audit SET caller = 'someone else' WHERE seq = 3`},
			"BROKEN", false, false},
		{"entry", []string{`DROP TRIGGER log_entries_no_update`, `UPDATE log_entries SET entry = CAST(replace(CAST(entry AS TEXT), 'agent-3', 'agent-X') AS BLOB) WHERE idx = 7`},
			"entry", true, false},
		// Storage index 2 is leaf 1's hash (leaf 0, leaf 1, their parent, ...).
		{"tree hash", []string{`DROP TRIGGER log_hashes_no_update`, `UPDATE log_hashes SET hash = zeroblob(32) WHERE idx = 1`},
			"", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			d := startDaemon(t, data)
			c := dialDaemon(t, d.grpc)
			sign := func(from, to int) {
				for i := from; i < to; i++ {
					if _, err := c.SignCard(t.Context(), &pb.SignCardRequest{Card: logCard(fmt.Sprint("agent-", i), "agents.example.com")}); err != nil {
						t.Fatal(err)
					}
				}
			}
			sign(0, 3) // six leaves: two signatures per card
			logURL := "http://" + d.http + transparency.PathPrefix
			keyFile := filepath.Join(dir, "log-key.txt")
			_, key := httpGet(t, "http://"+d.http+transparency.KeyPath)
			writeFile(t, keyFile, string(key))
			state := filepath.Join(dir, "state.json")
			mustCLI(t, dir, "log", "monitor", "--url", logURL, "--log-key", keyFile, "--state", state)
			mustCLI(t, dir, "log", "checkpoint", "--url", logURL, "--log-key", keyFile, "--out", filepath.Join(dir, "cp1"))
			sign(3, 6)
			d.stop()

			tamperDB(t, data, tt.stmts...)
			d = startDaemon(t, data)
			logURL = "http://" + d.http + transparency.PathPrefix
			r := cli(t, dir, nil, "audit", "verify", "--server", d.grpc, "--log", logURL, "--log-key", keyFile)
			if r.Code != 1 || !strings.Contains(r.Stdout+r.Stderr, tt.audit) {
				t.Fatalf("audit verify --log: exit %d, want 1 naming %q\n%s%s", r.Code, tt.audit, r.Stdout, r.Stderr)
			}
			before, _ := os.ReadFile(state)
			m := cli(t, dir, nil, "log", "monitor", "--url", logURL, "--log-key", keyFile, "--state", state, "--json")
			v := cli(t, dir, nil, "log", "verify", "--url", logURL, "--log-key", keyFile, filepath.Join(dir, "cp1"))
			if tt.monitor != (m.Code == 3) || tt.monitor != strings.Contains(m.Stdout, `"event":"alarm"`) {
				t.Fatalf("monitor exit %d, want an alarm: %v\n%s%s", m.Code, tt.monitor, m.Stdout, m.Stderr)
			}
			if tt.verify != (v.Code == 3) {
				t.Fatalf("log verify exit %d, want an alarm: %v\n%s%s", v.Code, tt.verify, v.Stdout, v.Stderr)
			}
			if after, _ := os.ReadFile(state); tt.monitor && string(after) != string(before) {
				t.Fatal("the monitor moved its state past an alarm")
			}
			d.stop()
		})
	}
}

// TestTransparencyLogFork: two logs under one key and origin (a split
// brain, or an operator showing different views to different people) give
// two checkpoints of one size with different roots; log verify and the
// monitor call it a fork.
func TestTransparencyLogFork(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "log-key.pem")
	out := mustCLI(t, dir, "log", "key", "create", "--origin", "cardsign.example.com/log", key)
	keyFile := filepath.Join(dir, "log-key.txt")
	writeFile(t, keyFile, strings.TrimSpace(out.Stdout)+"\n")
	cfg := filepath.Join(dir, "cardsignd.yaml")
	writeFile(t, cfg, "log:\n  origin: cardsign.example.com/log\n  keys: [\"file:"+key+"\"]\n")
	var urls []string
	for i, host := range []string{"a.example.com", "b.example.com"} {
		d := startDaemon(t, filepath.Join(dir, fmt.Sprint("data", i)), "--config", cfg)
		if _, err := dialDaemon(t, d.grpc).SignCard(t.Context(), &pb.SignCardRequest{Card: logCard("agent", host)}); err != nil {
			t.Fatal(err)
		}
		urls = append(urls, "http://"+d.http+transparency.PathPrefix)
	}
	cp := filepath.Join(dir, "cp-a")
	mustCLI(t, dir, "log", "checkpoint", "--url", urls[0], "--log-key", keyFile, "--out", cp)
	r := cli(t, dir, nil, "log", "verify", "--url", urls[1], "--log-key", keyFile, cp)
	if r.Code != 3 || !strings.Contains(r.Stdout+r.Stderr, "FORK") {
		t.Fatalf("log verify across a fork: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	state := filepath.Join(dir, "state.json")
	mustCLI(t, dir, "log", "monitor", "--url", urls[0], "--log-key", keyFile, "--state", state)
	r = cli(t, dir, nil, "log", "monitor", "--url", urls[1], "--log-key", keyFile, "--state", state)
	if r.Code != 3 || !strings.Contains(r.Stdout+r.Stderr, "FORK") {
		t.Fatalf("monitor across a fork: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestReplicasShareTheLogKey: a replica whose log keys share none with the
// keys the replicas before it sign with (same origin, same database) does
// not start, and says what to do; listing the old key beside a new one (a
// rotation) is accepted, and so is a new origin (a new log).
func TestReplicasShareTheLogKey(t *testing.T) {
	raw := newPGDatabase(t)
	work := t.TempDir()
	key := func(name string) string {
		path := filepath.Join(work, name+".pem")
		mustCLI(t, work, "log", "key", "create", "--origin", "test.example/log", path)
		return "file:" + path
	}
	k1, k2 := key("k1"), key("k2")
	config := func(name, origin string, keys ...string) string {
		path := filepath.Join(work, name+".yaml")
		quoted := make([]string, len(keys))
		for i, k := range keys {
			quoted[i] = fmt.Sprintf("%q", k)
		}
		writeFile(t, path, fmt.Sprintf("store:\n  url: %q\nreplica: %s\nlog:\n  origin: %s\n  keys: [%s]\n", raw, name, origin, strings.Join(quoted, ", ")))
		return path
	}
	a := startDaemon(t, filepath.Join(work, "data-a"), "--config", config("a", "test.example/log", k1))

	out, err := exec.Command(daemonBin, "--data-dir", filepath.Join(work, "data-b"), "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--config", config("b", "test.example/log", k2)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "none of this replica's keys") || !strings.Contains(string(out), "list the old key beside the new one") {
		t.Fatalf("a replica with another log key started, or did not say why (%v):\n%s", err, out)
	}
	// A rotation: the new key beside the old one.
	b := startDaemon(t, filepath.Join(work, "data-b"), "--config", config("b2", "test.example/log", k2, k1))
	b.stop()
	a.stop()
	// A new log under a new origin is the way out of a lost key.
	c := startDaemon(t, filepath.Join(work, "data-c"), "--config", config("c", "test.example/log2", k2))
	if !strings.Contains(c.log.String(), "this starts a new log") {
		t.Fatalf("no warning for a new origin:\n%s", c.log.String())
	}
	c.stop()
}
