package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/memlog"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/webtrust"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const logOrigin = "cardsign.test/log"

// testLog is an in-memory log served at URL+"/log/", its verifier key
// served at URL+transparency.KeyPath, and the audit records its leaves are the
// entries of. Which log the server shows can be swapped (a fork, a
// rollback).
type testLog struct {
	*memlog.Log
	vkey    string
	URL     string
	records []audit.Record
	shown   atomic.Pointer[memlog.Log]
}

func newTestLog(t *testing.T) *testLog {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	l, err := memlog.New(logOrigin, key)
	if err != nil {
		t.Fatal(err)
	}
	tl := &testLog{Log: l, vkey: l.Signer().VerifierKeys()[0]}
	tl.shown.Store(l)
	mux := http.NewServeMux()
	mux.HandleFunc(transparency.KeyPath, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, tl.vkey) })
	mux.Handle(transparency.PathPrefix, http.StripPrefix(transparency.PathPrefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tl.shown.Load().Handler().ServeHTTP(w, r)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tl.URL = srv.URL
	return tl
}

func (tl *testLog) logURL() string     { return tl.URL + transparency.PathPrefix }
func (tl *testLog) show(l *memlog.Log) { tl.shown.Store(l) }

// logRecord is audit record seq of card agent-SEQ (payments-agent for
// seq 5) at host aSEQ.example.com, every seventh refused.
func logRecord(seq int64, prefix string) audit.Record {
	r := audit.Record{
		Seq: seq, Time: time.Date(2026, 11, 23, 10, 0, 0, int(seq), time.UTC), Caller: "token:ci", RequestID: fmt.Sprint("req-", seq),
		CardName: fmt.Sprintf("%sagent-%d", prefix, seq), CardVersion: "1.0", CanonicalSHA256: bytes.Repeat([]byte{byte(seq)}, 32),
		KID: "k1", Alg: "ES256", Profile: "spec", Signature: fmt.Sprint("sig", seq),
		Hosts: []string{fmt.Sprintf("a%d.example.com", seq)},
	}
	if seq == 5 {
		r.CardName, r.Hosts = "payments-agent", []string{"pay.example.com"}
	}
	if seq%7 == 0 {
		r.Outcome, r.Reason, r.KID, r.Alg, r.Profile, r.Signature = audit.OutcomeRefused, "host not allowed", "", "", "", ""
	}
	return r
}

// grow appends n records (chained) and their entries.
func (tl *testLog) grow(t *testing.T, n int, prefix string) {
	t.Helper()
	prev := audit.Genesis()
	if len(tl.records) > 0 {
		prev = tl.records[len(tl.records)-1].Hash
	}
	var entries [][]byte
	for range n {
		r := logRecord(int64(len(tl.records))+1, prefix)
		r.PrevHash, r.Hash = prev, r.ComputeHash(prev)
		prev = r.Hash
		tl.records = append(tl.records, r)
		entries = append(entries, transparency.NewEntry(r, r.Hosts).Marshal())
	}
	if err := tl.Append(entries...); err != nil {
		t.Fatal(err)
	}
}

func TestLogKeyCreateShow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log-key.pem")
	r := runCLI(t, "log", "key", "create", "--origin", logOrigin, path)
	if r.Code != exitOK {
		t.Fatalf("key create: %d\n%s", r.Code, r.Stderr)
	}
	vkey := strings.TrimSpace(r.Stdout)
	if vs, err := transparency.ParseVerifierKeys(vkey); err != nil || vs[0].Name() != logOrigin || !strings.Contains(r.Stderr, "mode 0600") {
		t.Fatalf("key create printed %q (%v), stderr %s", r.Stdout, err, r.Stderr)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	if data, _ := os.ReadFile(path); !bytes.HasPrefix(data, []byte("-----BEGIN PRIVATE KEY-----")) {
		t.Fatalf("key file is not PKCS#8 PEM:\n%s", data)
	}
	r = runCLI(t, "log", "key", "show", "--origin", logOrigin, path)
	if r.Code != exitOK || strings.TrimSpace(r.Stdout) != vkey || strings.Contains(r.Stdout+r.Stderr, "PRIVATE") {
		t.Fatalf("key show: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	// Another origin names another log: same key, another verifier key.
	if r := runCLI(t, "log", "key", "show", "--origin", "other.test/log", path); r.Code != exitOK || strings.TrimSpace(r.Stdout) == vkey {
		t.Fatalf("key show --origin other: %d %q", r.Code, r.Stdout)
	}
	before, _ := os.ReadFile(path)
	if r := runCLI(t, "log", "key", "create", "--origin", logOrigin, path); r.Code != exitFail || !strings.Contains(r.Stderr, "refusing to overwrite") {
		t.Errorf("key create over an existing file: %d %s", r.Code, r.Stderr)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("key create overwrote a key")
	}
	// A signing key of another type, a readable key file, bad origins.
	ec := filepath.Join(dir, "ec.pem")
	if r := runCLI(t, "keygen", "--alg", "ES256", "--out", ec); r.Code != exitOK {
		t.Fatal(r.Stderr)
	}
	if r := runCLI(t, "log", "key", "show", "--origin", logOrigin, ec); r.Code != exitUsage || !strings.Contains(r.Stderr, "a log key is Ed25519") {
		t.Errorf("key show of an EC key: %d %s", r.Code, r.Stderr)
	}
	os.Chmod(path, 0o644)
	if r := runCLI(t, "log", "key", "show", "--origin", logOrigin, path); r.Code != exitUsage || !strings.Contains(r.Stderr, "chmod 600") {
		t.Errorf("key show of a 0644 key: %d %s", r.Code, r.Stderr)
	}
	for _, args := range [][]string{
		{"log", "key", "create", path + "2"},
		{"log", "key", "create", "--origin", "https://cardsign.test/log", path + "3"},
		{"log", "key", "create", "--origin", "a b", path + "4"},
		{"log", "key", "show", "--origin", logOrigin},
		{"log", "key", "create", "--origin", logOrigin, "--url", "http://x/", path + "5"},
		{"log", "key"},
		{"log", "key", "rotate", "--origin", logOrigin, path},
	} {
		if r := runCLI(t, args...); r.Code != exitUsage {
			t.Errorf("%q: %d %s", args, r.Code, r.Stderr)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("files left: %v", ents)
	}
}

func TestLoadLogKeys(t *testing.T) {
	tl := newTestLog(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "keys.txt")
	writeFile(t, file, []byte("# the log's keys\n\n"+tl.vkey+"\n"))
	ctx := t.Context()
	for _, spec := range []string{tl.vkey, " " + tl.vkey + "\n", file, tl.URL + transparency.KeyPath} {
		vs, err := webtrust.LoadLogKeys(ctx, spec, nil)
		if err != nil || len(vs) != 1 || vs[0].Name() != logOrigin {
			t.Errorf("%q: %v %v", spec, vs, err)
		}
	}
	for spec, want := range map[string]string{
		"":                            "give the log's key",
		logOrigin + "+0badc0de+AAAA":  "neither a log key nor a file",
		filepath.Join(dir, "missing"): "no such file",
		dir:                           "not a regular file",
		"/dev/zero":                   "not a regular file",
		tl.URL + "/nothing":           "404",
		tl.URL + transparency.PathPrefix + "checkpoint": "log key on line",
	} {
		if _, err := webtrust.LoadLogKeys(ctx, spec, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", spec, err, want)
		}
	}
}

func TestLogCheckpointAndVerify(t *testing.T) {
	tl := newTestLog(t)
	tl.grow(t, 300, "")
	dir := t.TempDir()
	old := filepath.Join(dir, "cp-300")
	r := runCLI(t, "log", "checkpoint", "--url", tl.logURL(), "--log-key", tl.vkey, "--out", old)
	if r.Code != exitOK || !strings.Contains(r.Stdout, "origin "+logOrigin) || !strings.Contains(r.Stdout, "size   300") {
		t.Fatalf("checkpoint: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = runCLI(t, "log", "checkpoint", "--url", tl.logURL(), "--log-key", tl.URL+transparency.KeyPath, "--json")
	var j struct {
		Origin, Root, Checkpoint string
		Size                     int64
	}
	if r.Code != exitOK || json.Unmarshal([]byte(r.Stdout), &j) != nil || j.Size != 300 || j.Origin != logOrigin {
		t.Fatalf("checkpoint --json: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if saved, _ := os.ReadFile(old); string(saved) != j.Checkpoint {
		t.Fatalf("--out wrote %q, the checkpoint is %q", saved, j.Checkpoint)
	}

	fork := tl.Fork()
	tl.grow(t, 100, "")
	verify := func(args ...string) result {
		return runCLI(t, append([]string{"log", "verify", "--url", tl.logURL(), "--log-key", tl.vkey}, args...)...)
	}
	if r := verify(old); r.Code != exitOK || !strings.Contains(r.Stdout, "consistent: the log's current checkpoint of 400 leaves") {
		t.Fatalf("verify: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	cur := filepath.Join(dir, "cp-400")
	runCLI(t, "log", "checkpoint", "--url", tl.logURL(), "--log-key", tl.vkey, "--out", cur)
	if r := verify(old, cur); r.Code != exitOK || !strings.Contains(r.Stdout, "consistent: "+cur+" of 400 leaves") {
		t.Fatalf("verify OLD NEW: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := verify(cur, old); r.Code != exitAlarm || !strings.HasPrefix(r.Stdout, "ROLLBACK: ") {
		t.Fatalf("verify NEW OLD: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// The server shows a fork: 450 leaves whose first 300 are the same,
	// the next 150 not those the checkpoint of 400 saw.
	appendEntries(t, fork, 150, "evil-")
	tl.show(fork)
	if r := verify(cur); r.Code != exitAlarm || !strings.HasPrefix(r.Stdout, "INCONSISTENT: ") || !strings.Contains(r.Stdout, "the log forked") ||
		!strings.Contains(r.Stdout, "keep both signed checkpoints as evidence") || !strings.Contains(r.Stdout, "    "+logOrigin+"\n    450\n") {
		t.Fatalf("verify against a fork: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// A fork of the same size, and the log rolled back.
	for _, c := range []struct {
		what   string
		from   *memlog.Log
		size   int64
		prefix string
	}{
		{"a same-size fork", fork, 400, "FORK: "},
		{"a rollback", tl.Log, 350, "ROLLBACK: "},
	} {
		shown := c.from.Fork()
		if err := shown.RollBack(c.size); err != nil {
			t.Fatal(err)
		}
		tl.show(shown)
		if r := verify(cur); r.Code != exitAlarm || !strings.HasPrefix(r.Stdout, c.prefix) {
			t.Fatalf("verify against %s: %d\n%s%s", c.what, r.Code, r.Stdout, r.Stderr)
		}
	}
	tl.show(tl.Log)

	// A tampered checkpoint file, another log's key, the log down.
	data, _ := os.ReadFile(old)
	bad := filepath.Join(dir, "cp-bad")
	writeFile(t, bad, bytes.Replace(data, []byte("\n300\n"), []byte("\n301\n"), 1))
	if r := verify(bad); r.Code != exitUsage || !strings.Contains(r.Stderr, "cp-bad") {
		t.Errorf("verify of an edited checkpoint: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	other := newTestLog(t)
	if r := runCLI(t, "log", "checkpoint", "--url", tl.logURL(), "--log-key", other.vkey); r.Code != exitFail || !strings.Contains(r.Stderr, "not signed by a trusted log key") {
		t.Errorf("checkpoint with another log's key: %d %s", r.Code, r.Stderr)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	if r := runCLI(t, "log", "verify", "--url", down.URL+"/log/", "--log-key", tl.vkey, old); r.Code != exitFail || !strings.Contains(r.Stderr, down.URL+"/log/checkpoint") {
		t.Errorf("verify with the log down: %d %s", r.Code, r.Stderr)
	}
	for _, args := range [][]string{
		{"log", "verify", "--url", tl.logURL(), old},
		{"log", "verify", "--log-key", tl.vkey, old},
		{"log", "verify", "--url", tl.logURL(), "--log-key", tl.vkey},
		{"log", "verify", "--url", tl.logURL(), "--log-key", tl.vkey, old, cur, bad},
		{"log", "checkpoint", "--url", tl.logURL(), "--log-key", tl.vkey, "--state", "x"},
		{"log", "checkpoint", "--url", tl.logURL(), "--log-key", "nonsense"},
		{"log", "frobnicate"},
	} {
		if r := runCLI(t, args...); r.Code != exitUsage {
			t.Errorf("%q: %d %s", args, r.Code, r.Stderr)
		}
	}
}

// appendEntries appends n entries to l that no audit record has.
func appendEntries(t *testing.T, l *memlog.Log, n int, prefix string) {
	t.Helper()
	var entries [][]byte
	for i := range n {
		r := logRecord(l.Len()+int64(i)+1, prefix)
		r.Hash = make([]byte, 32)
		entries = append(entries, transparency.NewEntry(r, r.Hosts).Marshal())
	}
	if err := l.Append(entries...); err != nil {
		t.Fatal(err)
	}
}

func TestLogMonitorCLI(t *testing.T) {
	tl := newTestLog(t)
	tl.grow(t, 40, "")
	state := filepath.Join(t.TempDir(), "monitor.json")
	monitor := func(extra ...string) result {
		return runCLI(t, append([]string{"log", "monitor", "--url", tl.logURL(), "--log-key", tl.URL + transparency.KeyPath, "--state", state, "--watch", "payments-agent", "--watch", "A33.example.com"}, extra...)...)
	}
	events := func(r result) []map[string]any {
		t.Helper()
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("not a JSON line: %q", line)
			}
			out = append(out, m)
		}
		return out
	}
	r := monitor("--json")
	ev := events(r)
	if r.Code != exitOK || len(ev) != 3 || ev[0]["event"] != "entry" || ev[0]["card_name"] != "payments-agent" || ev[0]["index"] != 4.0 ||
		ev[1]["hosts"].([]any)[0] != "a33.example.com" || ev[2]["event"] != "checkpoint" || ev[2]["size"] != 40.0 || ev[2]["first_run"] != true {
		t.Fatalf("first run: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "cardsign log monitor: no state in "+state+": trusting") {
		t.Errorf("first run stderr: %s", r.Stderr)
	}
	// Human lines; nothing new.
	r = monitor()
	if r.Code != exitOK || r.Stdout != fmt.Sprintf("checkpoint %s: 40 leaves (was 40), root %s, 0 matching entries\n", logOrigin, checkpointRoot(t, tl)) {
		t.Fatalf("second run: %d\n%q\n%s", r.Code, r.Stdout, r.Stderr)
	}
	// New leaves, one of them a card by the watched name that its owner
	// did not ask for.
	tl.grow(t, 10, "")
	tl.grow(t, 1, "")
	tl.records[len(tl.records)-1].CardName = "payments-agent" // (the record is not checked here)
	impostor := logRecord(52, "")
	impostor.CardName, impostor.Caller, impostor.Hosts, impostor.Hash = "payments-agent", "token:stolen", []string{"evil.example.net"}, make([]byte, 32)
	if err := tl.Append(transparency.NewEntry(impostor, impostor.Hosts).Marshal()); err != nil {
		t.Fatal(err)
	}
	r = monitor()
	if r.Code != exitOK || !strings.HasPrefix(r.Stdout, `MATCH leaf 51 (audit record 52) 2026-11-23T10:00:00.000000052Z signed card "payments-agent" version "1.0" hosts evil.example.net caller token:stolen kid k1 sha256 `) ||
		!strings.HasSuffix(r.Stdout, "checkpoint "+logOrigin+": 52 leaves (was 40), root "+checkpointRoot(t, tl).String()+", 1 matching entries\n") {
		t.Fatalf("third run: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// The log forks: alarm, exit 3, the state file untouched, again and
	// again.
	before, _ := os.ReadFile(state)
	fork := tl.Fork()
	if err := fork.Truncate(45); err != nil {
		t.Fatal(err)
	}
	appendEntries(t, fork, 17, "evil-") // 62 leaves, from the 46th on not the log's
	tl.show(fork)
	for range 2 {
		r = monitor("--json")
		ev = events(r)
		if r.Code != exitAlarm || len(ev) != 1 || ev[0]["event"] != "alarm" || ev[0]["alarm"] != "inconsistent" || ev[0]["old_size"] != 52.0 || ev[0]["new_size"] != 62.0 ||
			!strings.Contains(r.Stderr, "ALARM (INCONSISTENT): the state file "+state+" was not advanced") {
			t.Fatalf("fork: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		if after, _ := os.ReadFile(state); !bytes.Equal(before, after) {
			t.Fatal("the state file changed on an alarm")
		}
	}
	r = monitor()
	if r.Code != exitAlarm || !strings.HasPrefix(r.Stdout, "ALARM INCONSISTENT: the tree of 62 leaves") || !strings.Contains(r.Stdout, "  the checkpoint saved before:\n    "+logOrigin+"\n    52\n") {
		t.Fatalf("fork, human: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// A log that cannot be reached: exit 1, not an alarm.
	tl.show(nil)
	if r := monitor(); r.Code == exitAlarm || r.Code == exitOK {
		t.Errorf("log down: %d %s", r.Code, r.Stderr)
	}
	for _, args := range [][]string{
		{"log", "monitor", "--url", tl.logURL(), "--log-key", tl.vkey},
		{"log", "monitor", "--url", tl.logURL(), "--log-key", tl.vkey, "--state", state, "extra"},
		{"log", "monitor", "--url", tl.logURL(), "--log-key", tl.vkey, "--state", state, "--out", "x"},
	} {
		if r := runCLI(t, args...); r.Code != exitUsage {
			t.Errorf("%q: %d %s", args, r.Code, r.Stderr)
		}
	}
}

func checkpointRoot(t *testing.T, tl *testLog) tlog.Hash {
	t.Helper()
	_, signed, _ := tl.Checkpoint(t.Context())
	cp, err := transparency.OpenCheckpoint(signed, mustKeys(t, tl.vkey))
	if err != nil {
		t.Fatal(err)
	}
	return cp.Root
}

func mustKeys(t *testing.T, vkey string) []note.Verifier {
	t.Helper()
	vs, err := transparency.ParseVerifierKeys(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// auditServer serves records over the AuditService API, paged as
// cardsignd pages them.
type auditServer struct {
	pb.UnimplementedAuditServiceServer
	mu   sync.Mutex
	recs []audit.Record
}

func (s *auditServer) set(recs []audit.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = recs
}

func (s *auditServer) ListAuditRecords(ctx context.Context, req *pb.ListAuditRecordsRequest) (*pb.ListAuditRecordsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := &pb.ListAuditRecordsResponse{}
	for _, r := range s.recs {
		if r.Seq <= req.GetAfterSequence() {
			continue
		}
		if len(res.Records) == int(req.GetPageSize()) {
			res.NextAfterSequence = res.Records[len(res.Records)-1].GetSequence()
			break
		}
		res.Records = append(res.Records, &pb.AuditRecord{
			Sequence: r.Seq, Time: timestamppb.New(r.Time), Caller: r.Caller, RequestId: r.RequestID,
			CardName: r.CardName, CardVersion: r.CardVersion, CanonicalSha256: r.CanonicalSHA256,
			Kid: r.KID, Alg: r.Alg, Profile: r.Profile, Signature: r.Signature, PrevHash: r.PrevHash, Hash: r.Hash,
			Outcome: r.Outcome, Reason: r.Reason,
		})
	}
	return res, nil
}

func serveAudit(t *testing.T, s *auditServer) string {
	t.Helper()
	clearConnEnv(t)
	return serveGRPC(t, listenLoopback(t), func(srv *grpc.Server) { pb.RegisterAuditServiceServer(srv, s) })
}

// rechain recomputes the hashes of recs from the first, as someone with
// write access to the database could after editing one.
func rechain(recs []audit.Record) []audit.Record {
	out := append([]audit.Record(nil), recs...)
	prev := audit.Genesis()
	for i := range out {
		out[i].PrevHash, out[i].Hash = prev, out[i].ComputeHash(prev)
		prev = out[i].Hash
	}
	return out
}

// TestAuditVerifyLog: audit verify --log checks every record against its
// log entry and the tree against the signed checkpoint; tampering with a
// record, an entry, a stored tree hash or the checkpoint is caught.
func TestAuditVerifyLog(t *testing.T) {
	tl := newTestLog(t)
	tl.grow(t, 1100, "") // more than a page of records and four bundles
	as := &auditServer{}
	as.set(tl.records)
	addr := serveAudit(t, as)
	verify := func() result {
		return runCLI(t, "audit", "verify", "--server", addr, "--log", tl.logURL(), "--log-key", tl.URL+transparency.KeyPath)
	}
	root := checkpointRoot(t, tl)
	r := verify()
	if r.Code != exitOK || !strings.Contains(r.Stdout, "audit chain intact: 1100 records") ||
		!strings.Contains(r.Stdout, fmt.Sprintf("transparency log consistent with the audit records: 1100 leaves, root %s", root)) {
		t.Fatalf("verify: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// Records appended after the checkpoint: checked by the chain only.
	honest := tl.records
	more := append([]audit.Record(nil), honest...)
	next := logRecord(1101, "")
	next.PrevHash = honest[len(honest)-1].Hash
	next.Hash = next.ComputeHash(next.PrevHash)
	as.set(append(more, next))
	if r := verify(); r.Code != exitOK || !strings.Contains(r.Stdout, "note: records 1101 to 1101 came after the log's checkpoint") {
		t.Fatalf("records past the checkpoint: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	for _, tc := range []struct {
		name   string
		setup  func() (recs []audit.Record, shown *memlog.Log)
		stdout string
	}{
		{"record edited, chain left", func() ([]audit.Record, *memlog.Log) {
			recs := append([]audit.Record(nil), honest...)
			recs[600].CardName = "someone-else"
			return recs, tl.Log
		}, "audit chain BROKEN at record 601"},
		{"record edited and the chain recomputed", func() ([]audit.Record, *memlog.Log) {
			recs := append([]audit.Record(nil), honest...)
			recs[600].CardName = "someone-else"
			return rechain(recs), tl.Log
		}, `transparency log MISMATCH at record 601: its log entry (leaf 600) differs from the record: card name "agent-601" in the log, "someone-else" in the record; record hash`},
		{"entry edited", func() ([]audit.Record, *memlog.Log) {
			l := tl.Fork()
			r := honest[299]
			r.KID = "k2"
			l.SetEntry(299, transparency.NewEntry(r, r.Hosts).Marshal())
			return honest, l
		}, `transparency log MISMATCH at record 300: its log entry (leaf 299) differs from the record: kid "k2" in the log, "k1" in the record`},
		{"entry hosts edited (not in the chain)", func() ([]audit.Record, *memlog.Log) {
			l := tl.Fork()
			r := honest[1099]
			l.SetEntry(1099, transparency.NewEntry(r, []string{"evil.example.net"}).Marshal())
			return honest, l
		}, "transparency log MISMATCH at record 1100: the log's tile tile/0/004.p/76 serves the hash of leaf 1099 as "},
		{"entry not an entry", func() ([]audit.Record, *memlog.Log) {
			l := tl.Fork()
			l.SetEntry(3, []byte(`{"v":2}`))
			return honest, l
		}, "transparency log MISMATCH at record 4: its log entry (leaf 3) is not a valid entry"},
		{"stored leaf hash edited", func() ([]audit.Record, *memlog.Log) {
			l := tl.Fork()
			l.SetHash(tlog.StoredHashIndex(0, 700), tlog.Hash{1})
			return honest, l
		}, "transparency log MISMATCH at record 701: the log's tile tile/0/002 serves the hash of leaf 700 as AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=, but the entries hash to "},
		{"stored level-8 hash edited", func() ([]audit.Record, *memlog.Log) {
			l := tl.Fork()
			l.SetHash(tlog.StoredHashIndex(8, 1), tlog.Hash{1})
			return honest, l
		}, "transparency log MISMATCH at record 512: the log's tile tile/1/000.p/4 serves the hash of leaves 256 to 511 as AQAA"},
		{"stored upper hash edited, checkpoint signed over it", func() ([]audit.Record, *memlog.Log) {
			l := tl.Fork()
			l.SetHash(tlog.StoredHashIndex(10, 0), tlog.Hash{1})
			if err := l.Publish(); err != nil {
				t.Fatal(err)
			}
			return honest, l
		}, "transparency log MISMATCH: the log's entries for records 1 to 1100 hash to root " + root.String() + ", but its signed checkpoint of 1100 leaves says"},
		{"records removed", func() ([]audit.Record, *memlog.Log) {
			return honest[:1000], tl.Log
		}, "transparency log MISMATCH: the log's checkpoint covers 1100 leaves but the audit log has 1000 records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, shown := tc.setup()
			as.set(recs)
			tl.show(shown)
			defer tl.show(tl.Log)
			r := verify()
			if r.Code != exitFail || !strings.Contains(r.Stdout, tc.stdout) {
				t.Fatalf("%d\n%s%s\nwant %s", r.Code, r.Stdout, r.Stderr, tc.stdout)
			}
		})
	}

	// An edited checkpoint: refused before any record is read.
	as.set(honest)
	forged := tl.Fork()
	_, signed, _ := tl.Checkpoint(t.Context())
	forged.SetCheckpoint(1100, bytes.Replace(signed, []byte("\n1100\n"), []byte("\n1099\n"), 1))
	tl.show(forged)
	if r := verify(); r.Code != exitFail || !strings.Contains(r.Stderr, "cardsign audit verify: transparency log: checkpoint of "+tl.logURL()) {
		t.Fatalf("edited checkpoint: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	tl.show(tl.Log)

	for _, args := range [][]string{
		{"audit", "verify", "--server", addr, "--log", tl.logURL()},
		{"audit", "verify", "--server", addr, "--log-key", tl.vkey},
		{"audit", "list", "--server", addr, "--log", tl.logURL(), "--log-key", tl.vkey},
	} {
		if r := runCLI(t, args...); r.Code != exitUsage {
			t.Errorf("%q: %d %s", args, r.Code, r.Stderr)
		}
	}
}

// TestLogAgainstCardsignd runs the log commands against a real cardsignd:
// the entries its store writes are those audit verify rebuilds from the
// records, the monitor finds a card by name and by host, and log verify
// proves the log's growth consistent.
func TestLogAgainstCardsignd(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	d := runDaemon(t, daemonBin, data, "limits:\n  rate: 0\n")
	base := "http://" + d.http
	card := func(name, host string) string {
		path := filepath.Join(dir, name+".json")
		writeFile(t, path, []byte(`{"name":"`+name+`","description":"d","supportedInterfaces":[{"url":"https://`+host+`/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`))
		return path
	}
	sign := func(name, host string) {
		t.Helper()
		if r := runCLI(t, "sign", "--server", d.grpc, card(name, host)); r.Code != exitOK {
			t.Fatalf("sign %s: %d %s", name, r.Code, r.Stderr)
		}
	}
	for i := range 5 {
		sign(fmt.Sprint("agent-", i), fmt.Sprintf("a%d.example.com", i))
	}
	keyURL := base + transparency.KeyPath
	logURL := base + transparency.PathPrefix
	cp := filepath.Join(dir, "cp")
	size := func(args ...string) int64 {
		t.Helper()
		r := runCLI(t, append([]string{"log", "checkpoint", "--url", logURL, "--log-key", keyURL, "--json"}, args...)...)
		var j struct{ Size int64 }
		if r.Code != exitOK || json.Unmarshal([]byte(r.Stdout), &j) != nil || j.Size < 5 {
			t.Fatalf("log checkpoint: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		return j.Size
	}
	// A leaf per signature: the CLI may ask for more than one per card.
	first := size("--out", cp)
	state := filepath.Join(dir, "monitor.json")
	monitor := func() result {
		return runCLI(t, "log", "monitor", "--url", logURL, "--log-key", keyURL, "--state", state, "--watch", "payments", "--watch", "*.payments.example.com", "--json")
	}
	if r := monitor(); r.Code != exitOK || strings.Count(r.Stdout, "\n") != 1 || !strings.Contains(r.Stdout, `"event":"checkpoint"`) || !strings.Contains(r.Stderr, "on first use") {
		t.Fatalf("monitor, first run: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	sign("payments", "api.example.com")
	sign("look-alike", "eu.payments.example.com")
	sign("agent-5", "a5.example.com")
	r := monitor()
	if r.Code != exitOK || strings.Count(r.Stdout, `"event":"entry"`) != 4 || // two signatures (spec and sdk profiles) per card
		!strings.Contains(r.Stdout, `"card_name":"payments"`) ||
		!strings.Contains(r.Stdout, `"hosts":["eu.payments.example.com"]`) || !strings.Contains(r.Stdout, fmt.Sprintf(`"previous_size":%d`, first)) {
		t.Fatalf("monitor, second run: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// A private agent's entries commit to its name, hosts and caller: the
	// monitor does not see them, until given the agent's salt (a reader's
	// GET /agents/ID/log-salt; authentication is off on loopback).
	if r := runCLI(t, "sign", "--server", d.grpc, "--register", "--agent", "secret-payments", card("secret-payments", "secret.payments.example.com")); r.Code != exitOK {
		t.Fatalf("sign --register: %d %s", r.Code, r.Stderr)
	}
	if err := os.WriteFile(state+".1", mustRead(t, state), 0o600); err != nil { // before the private agent's leaves
		t.Fatal(err)
	}
	if r := monitor(); r.Code != exitOK || strings.Contains(r.Stdout, `"event":"entry"`) || strings.Contains(r.Stdout, "secret") {
		t.Fatalf("monitor, a private agent registered: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	resp, err := http.Get(base + "/agents/secret-payments/log-salt")
	if err != nil {
		t.Fatal(err)
	}
	var salt struct{ Salt string }
	if err := json.NewDecoder(resp.Body).Decode(&salt); err != nil || resp.StatusCode != 200 {
		t.Fatalf("log-salt: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	for _, watch := range []string{"secret-payments", "SECRET.payments.example.com"} {
		if err := os.WriteFile(state, mustRead(t, state+".1"), 0o600); err != nil { // the same new leaves, once per watch
			t.Fatal(err)
		}
		r := runCLI(t, "log", "monitor", "--url", logURL, "--log-key", keyURL, "--state", state, "--watch", watch, "--salt", salt.Salt, "--json")
		if r.Code != exitOK || strings.Count(r.Stdout, `"event":"entry"`) != 2 || !strings.Contains(r.Stdout, `"card_name":"sealed:`) {
			t.Fatalf("monitor --watch %s --salt: %d\n%s%s", watch, r.Code, r.Stdout, r.Stderr)
		}
	}
	if r := runCLI(t, "log", "monitor", "--url", logURL, "--log-key", keyURL, "--state", state, "--watch", "x", "--salt", "nothex"); r.Code != exitUsage || !strings.Contains(r.Stderr, "--salt #1") {
		t.Fatalf("monitor --salt nothex: %d %s", r.Code, r.Stderr)
	}
	second := size()
	if r := runCLI(t, "log", "verify", "--url", logURL, "--log-key", keyURL, cp); r.Code != exitOK || !strings.Contains(r.Stdout, fmt.Sprintf("consistent: the log's current checkpoint of %d leaves", second)) {
		t.Fatalf("log verify: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := runCLI(t, "audit", "verify", "--server", d.grpc, "--log", logURL, "--log-key", keyURL); r.Code != exitOK ||
		!strings.Contains(r.Stdout, fmt.Sprintf("transparency log consistent with the audit records: %d leaves", second)) {
		t.Fatalf("audit verify --log: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
