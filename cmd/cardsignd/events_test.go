package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/internal/rsyslogtest"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/transparency"
)

// Receiver modes: how a test's webhook receiver answers.
const (
	modeOK       = iota
	modeDown     // 503
	modeHang     // never answers
	modeEndless  // 200 and a body without end
	modeRedirect // a redirect to itself
)

// hookReceiver is a webhook receiver as an organisation runs one: it
// verifies every request with the Standard Webhooks reference library
// (holding only one of the daemon's two secrets, as during a rotation)
// and records what it took, in order.
type hookReceiver struct {
	t     *testing.T
	wh    *standardwebhooks.Webhook
	mode  atomic.Int32
	delay atomic.Int64 // nanoseconds each taken request waits
	srv   *httptest.Server

	mu          sync.Mutex
	seqs        []int64
	ids         map[int64]string
	bad         []string
	checkpoints [][]byte // the log checkpoint events' signed notes
}

func newHookReceiver(t *testing.T, secret string, delay time.Duration) *hookReceiver {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := &hookReceiver{t: t, wh: wh, ids: map[int64]string{}}
	h.delay.Store(int64(delay))
	h.srv = httptest.NewServer(h)
	t.Cleanup(func() { h.mode.Store(modeOK); h.srv.CloseClientConnections(); h.srv.Close() })
	return h
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	switch h.mode.Load() {
	case modeDown:
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	case modeHang:
		<-r.Context().Done()
		return
	case modeRedirect:
		http.Redirect(w, r, r.URL.String(), http.StatusFound)
		return
	}
	time.Sleep(time.Duration(h.delay.Load()))
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.wh.Verify(body, r.Header); err != nil {
		h.bad = append(h.bad, "signature: "+err.Error())
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev struct {
		ID   string
		Type string
		Data struct {
			Seq        int64
			Size       int64
			Checkpoint string
		}
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID != r.Header.Get("webhook-id") || r.Header.Get("Content-Type") != "application/cloudevents+json; charset=utf-8" {
		h.bad = append(h.bad, fmt.Sprintf("event %.80s (%v), webhook-id %s", body, err, r.Header.Get("webhook-id")))
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	if ev.Type == "dev.cardsign.log.checkpoint" {
		if !strings.HasSuffix(ev.ID, fmt.Sprintf("/checkpoint/%d", ev.Data.Size)) {
			h.bad = append(h.bad, "checkpoint event id "+ev.ID)
		}
		h.checkpoints = append(h.checkpoints, []byte(ev.Data.Checkpoint))
		return
	}
	if prev, ok := h.ids[ev.Data.Seq]; ok && prev != ev.ID {
		h.bad = append(h.bad, fmt.Sprintf("seq %d came again with another id: %s, then %s", ev.Data.Seq, prev, ev.ID))
	}
	h.ids[ev.Data.Seq] = ev.ID
	h.seqs = append(h.seqs, ev.Data.Seq)
	if h.mode.Load() == modeEndless {
		// Taken, then answered 200 with a body that never ends: the
		// sender must not wait for its end.
		h.mu.Unlock()
		defer h.mu.Lock()
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat("x", 16<<10))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
}

func (h *hookReceiver) got() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.bad) > 0 {
		h.t.Fatalf("the receiver refused requests: %v", h.bad)
	}
	return append([]int64(nil), h.seqs...)
}

// waitDelivered waits until the receiver holds every record up to n, then
// checks the order and returns the number of redeliveries.
func (h *hookReceiver) waitDelivered(t *testing.T, n int64, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		seqs := h.got()
		redelivered, err := testsupport.DeliveredInOrder(seqs, n)
		if err == nil {
			return redelivered
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v (%d deliveries)", within, err, len(seqs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tailEvents reads every event with cardsign events tail --from 1 --json.
func tailEvents(t *testing.T, work, addr string) []map[string]any {
	t.Helper()
	r := mustCLI(t, work, "events", "tail", "--from", "1", "--json", "--server", addr)
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("events tail line %q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

func secretFile(t *testing.T, dir, name string) (path, secret string) {
	t.Helper()
	path = filepath.Join(dir, name)
	mustCLI(t, dir, "events", "secret", "--out", path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("events secret wrote %s with mode %v, want 0600", path, st.Mode().Perm())
	}
	return path, strings.TrimSpace(string(b))
}

// TestEventsDeliveredAcrossKill: cardsignd signs under load and delivers
// every audit record to a webhook, a real rsyslogd and a file; it is
// killed with SIGKILL mid-delivery and started again; then the webhook is
// down for a while. Every event arrives, in order per sink, duplicates only
// with the same id; events tail shows the same events; the lag metrics
// follow; a hostile receiver never holds signing back.
func TestEventsDeliveredAcrossKill(t *testing.T) {
	work := t.TempDir()
	oldSecretFile, _ := secretFile(t, work, "old-secret")
	newSecretFile, newSecret := secretFile(t, work, "new-secret")
	hook := newHookReceiver(t, newSecret, 2*time.Millisecond) // slow enough to be mid-delivery at the kill
	syslog := rsyslogtest.Start(t, nil)
	eventsFile := filepath.Join(work, "events.jsonl")
	cfg := filepath.Join(work, "cardsignd.yaml")
	writeFile(t, cfg, fmt.Sprintf(`limits:
  rate: 0
events:
  source: urn:cardsign:test
  sinks:
    - {name: hook, type: webhook, url: %q, secret_files: [%q, %q], timeout: 2s}
    - {name: syslog, type: syslog, address: %q, transport: tcp, facility: local3}
    - {name: file, type: file, path: %q, max_bytes: 1048576}
    - {name: keys, type: file, path: %q, types: ["dev.cardsign.key.*"]}
`, hook.srv.URL, oldSecretFile, newSecretFile, syslog.Addr, eventsFile, filepath.Join(work, "keys.jsonl")))
	data := filepath.Join(work, "data")
	d := startDaemon(t, data, "--config", cfg)
	received := signLoad(t, d.grpc, 8)
	time.Sleep(1500 * time.Millisecond)
	d.cmd.Process.Signal(syscall.SIGKILL) // kill -9 mid-load, mid-delivery
	<-d.exited
	if n := len(received()); n < 50 {
		t.Fatalf("only %d signatures before the kill; the load did not run", n)
	}
	before := len(hook.got())
	d = startDaemon(t, data, "--config", cfg)
	evs := tailEvents(t, work, d.grpc)
	head := int64(len(evs))
	if before >= int(head) {
		t.Fatalf("the receiver had %d events of %d at the kill: the kill was not mid-delivery", before, head)
	}
	redelivered := hook.waitDelivered(t, head, time.Minute)
	t.Logf("%d records; %d delivered before kill -9; %d delivered again after it", head, before, redelivered)
	checkCheckpoints(t, d, hook, head)
	for _, ev := range evs {
		seq := int64(ev["data"].(map[string]any)["seq"].(float64))
		hook.mu.Lock()
		id := hook.ids[seq]
		hook.mu.Unlock()
		if ev["id"] != id || ev["source"] != "urn:cardsign:test" {
			t.Fatalf("record %d: events tail says id %v source %v, the webhook got %s", seq, ev["id"], ev["source"], id)
		}
	}

	// The webhook is down: signing goes on; delivery catches up after.
	hook.mode.Store(modeDown)
	c := dialDaemon(t, d.grpc)
	for i := range 5 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if _, err := c.SignCard(ctx, &pb.SignCardRequest{Card: approvalCard(fmt.Sprint(i), "down.example.com")}); err != nil {
			t.Fatalf("signing while the receiver is down: %v", err)
		}
		cancel()
	}
	waitMetric(t, d, `cardsign_events_failures_total{sink="hook"}`, func(v float64) bool { return v > 0 })
	hook.mode.Store(modeOK)
	head = int64(len(tailEvents(t, work, d.grpc)))
	hook.waitDelivered(t, head, time.Minute)
	waitMetric(t, d, `cardsign_events_lag_records{sink="hook"}`, func(v float64) bool { return v == 0 })

	// Hostile receivers: hanging, a redirect loop, an endless body. Each
	// signature is still returned at once, while delivery fails (and says
	// why) or, for a 200 with an endless body, succeeds without reading it
	// all.
	for _, tc := range []struct {
		mode int32
		log  string
	}{{modeHang, "timeout awaiting response headers"}, {modeRedirect, "redirects are not followed"}, {modeEndless, ""}} {
		hook.mode.Store(tc.mode)
		for i := range 3 {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			if _, err := c.SignCard(ctx, &pb.SignCardRequest{Card: approvalCard(fmt.Sprint(tc.mode, i), "hostile.example.com")}); err != nil {
				t.Fatalf("signing while the receiver is hostile (mode %d): %v", tc.mode, err)
			}
			cancel()
		}
		if tc.log != "" {
			testsupport.WaitFor(t, "the log to say "+tc.log, 30*time.Second, func() bool { return strings.Contains(d.log.String(), tc.log) })
		} else {
			waitMetric(t, d, `cardsign_events_lag_records{sink="hook"}`, func(v float64) bool { return v == 0 })
		}
	}
	hook.mode.Store(modeOK)
	head = int64(len(tailEvents(t, work, d.grpc)))
	hook.waitDelivered(t, head, time.Minute)

	// The file and the syslog receiver have every record too, in order.
	testsupport.WaitFor(t, "the file and syslog sinks to catch up", time.Minute, func() bool {
		fs, sl := fileSeqs(t, eventsFile), syslog.Lines()
		if len(sl) > 0 && strings.Contains(sl[len(sl)-1], " log.checkpoint - ") {
			sl = sl[:len(sl)-1] // a batch ends with the log's checkpoint
		}
		return len(fs) > 0 && fs[len(fs)-1] == head && len(sl) > 0 && syslogSeq(t, sl[len(sl)-1]) == head
	})
	if _, err := os.Stat(eventsFile + ".1"); err != nil {
		t.Fatalf("the file sink never rotated (max_bytes 1 MiB): %v", err)
	}
	if _, err := testsupport.DeliveredInOrder(fileSeqs(t, eventsFile), head); err != nil {
		t.Fatalf("file sink: %v", err)
	}
	var sl []int64
	for _, l := range syslog.Lines() {
		if strings.Contains(l, " log.checkpoint - ") {
			continue
		}
		var pri int
		if _, err := fmt.Sscanf(l, "<%d>1 ", &pri); err != nil || pri/8 != 19 { // facility local3
			t.Fatalf("syslog line with an unexpected PRI: %.60q", l)
		}
		sl = append(sl, syslogSeq(t, l))
	}
	if _, err := testsupport.DeliveredInOrder(sl, head); err != nil {
		t.Fatalf("syslog sink: %v", err)
	}
	// The keys sink took only key events: the first key's creation.
	if keys := fileSeqs(t, filepath.Join(work, "keys.jsonl")); len(keys) == 0 || keys[0] != 1 {
		t.Fatalf("keys sink: %v, want the first key's record (seq 1)", keys)
	}

	// events tail --follow prints a new record as it is committed.
	follow := exec.Command(cliBin, "events", "tail", "--follow", "--last", "1", "--server", d.grpc)
	out, _ := follow.StdoutPipe()
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer follow.Process.Kill()
	lines := bufio.NewScanner(out)
	lines.Scan() // the last record
	if _, err := c.SignCard(t.Context(), &pb.SignCardRequest{Card: approvalCard("follow", "follow.example.com")}); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() || !strings.Contains(lines.Text(), fmt.Sprintf("%d  ", head+1)) || !strings.Contains(lines.Text(), `card.signed  "Orders"`) {
		t.Fatalf("events tail --follow printed %q, want record %d", lines.Text(), head+1)
	}
	d.stop()
}

// fileSeqs reads the sequence numbers of a file sink's events, from its
// rotated files (the oldest first) to the file.
func fileSeqs(t *testing.T, path string) []int64 {
	t.Helper()
	var b []byte
	for i := 10; i >= 0; i-- {
		p := path
		if i > 0 {
			p = fmt.Sprintf("%s.%d", path, i)
		}
		part, err := os.ReadFile(p)
		if err == nil {
			b = append(b, part...)
		}
	}
	var out []int64
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var ev struct {
			Type string
			Data struct{ Seq int64 }
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("file sink line %q: %v", l, err)
		}
		if ev.Type != "dev.cardsign.log.checkpoint" {
			out = append(out, ev.Data.Seq)
		}
	}
	return out
}

// syslogSeq reads the sequence number of the event in a syslog message.
func syslogSeq(t *testing.T, line string) int64 {
	t.Helper()
	i := strings.Index(line, " - {")
	var ev struct{ Data struct{ Seq int64 } }
	if i < 0 || json.Unmarshal([]byte(line[i+3:]), &ev) != nil {
		t.Fatalf("syslog line %.80q holds no event", line)
	}
	return ev.Data.Seq
}

// waitMetric waits until the metric's value (the exact series text) meets
// ok.
func waitMetric(t *testing.T, d *daemon, series string, ok func(float64) bool) {
	t.Helper()
	testsupport.WaitFor(t, series, time.Minute, func() bool {
		_, body := httpGet(t, "http://"+d.http+"/metrics")
		for _, l := range strings.Split(string(body), "\n") {
			if rest, found := strings.CutPrefix(l, series+" "); found {
				var v float64
				fmt.Sscan(rest, &v)
				return ok(v)
			}
		}
		return false
	})
}

// TestEventsReplicasOnPostgreSQL: two replicas on one database deliver the
// shared audit log to one webhook, one replica at a time: while the lease
// holder lives each event arrives once; after it is killed with SIGKILL
// mid-delivery, the other takes over from the shared cursor, and every
// event arrives in order, a redelivered one with its id. events tail needs
// the auditor role.
func TestEventsReplicasOnPostgreSQL(t *testing.T) {
	url := newPGDatabase(t)
	ci, ciSum := token("ci")
	auditor, auditorSum := token("auditor")
	reader, readerSum := token("reader")
	work := t.TempDir()
	secretPath, secret := secretFile(t, work, "secret")
	hook := newHookReceiver(t, secret, 0)
	rs := startReplicas(t, url, 2, replicaOptions{config: fmt.Sprintf(`auth:
  tokens:
    - {name: ci, sha256: %s, roles: [signer]}
    - {name: auditor, sha256: %s, roles: [auditor]}
    - {name: reader, sha256: %s, roles: [reader]}
events:
  sinks:
    - {name: siem, type: webhook, url: %q, secret_files: [%q]}
`, ciSum, auditorSum, readerSum, hook.srv.URL, secretPath)})
	sign := []pb.SigningServiceClient{dialDaemon(t, rs.ds[0].grpc), dialDaemon(t, rs.ds[1].grpc)}
	signOn := func(i, n int) {
		t.Helper()
		for j := range n {
			ctx, cancel := context.WithTimeout(as(t.Context(), ci), 10*time.Second)
			_, err := sign[i].SignCard(ctx, &pb.SignCardRequest{Card: approvalCard(fmt.Sprint(i, "-", j), "orders.example.com")})
			cancel()
			if err != nil {
				t.Fatalf("signing on replica %d: %v", i, err)
			}
		}
	}
	signOn(0, 20)
	signOn(1, 20)
	head := func(addr string) int64 {
		t.Helper()
		tok := filepath.Join(work, "auditor.token")
		writeFile(t, tok, auditor)
		r := mustCLI(t, work, "events", "tail", "--last", "1", "--json", "--server", addr, "--token-file", tok)
		var ev struct{ Data struct{ Seq int64 } }
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &ev); err != nil {
			t.Fatalf("events tail --last 1: %q: %v", r.Stdout, err)
		}
		return ev.Data.Seq
	}
	n := head(rs.ds[1].grpc)
	if redelivered := hook.waitDelivered(t, n, time.Minute); redelivered != 0 {
		t.Fatalf("%d events delivered twice while the lease holder lived: one replica delivers", redelivered)
	}
	var leader int = -1
	for i, d := range rs.ds {
		if strings.Contains(d.log.String(), "events: this replica delivers the events") {
			if leader >= 0 {
				t.Fatalf("both replicas delivered events:\n%s\n%s", rs.ds[0].log.String(), rs.ds[1].log.String())
			}
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no replica says it delivers the events")
	}
	// A reader may not tail the events.
	readerTok := filepath.Join(work, "reader.token")
	writeFile(t, readerTok, reader)
	if r := cli(t, work, nil, "events", "tail", "--server", rs.ds[0].grpc, "--token-file", readerTok); r.Code == 0 || !strings.Contains(r.Stderr, "PermissionDenied") {
		t.Fatalf("events tail as a reader: exit %d, %s", r.Code, r.Stderr)
	}

	// The deliverer is killed mid-delivery (the receiver is slow); the
	// other replica signs on, takes the lease and delivers the rest.
	other := 1 - leader
	hook.delay.Store(int64(20 * time.Millisecond))
	signOn(other, 30)
	rs.ds[leader].cmd.Process.Signal(syscall.SIGKILL)
	<-rs.ds[leader].exited
	signOn(other, 10)
	n = head(rs.ds[other].grpc)
	redelivered := hook.waitDelivered(t, n, 90*time.Second)
	if !strings.Contains(rs.ds[other].log.String(), "events: this replica delivers the events") {
		t.Fatalf("the surviving replica never took the delivery over:\n%s", rs.ds[other].log.String())
	}
	t.Logf("%d records delivered across kill -9 of the delivering replica; %d delivered twice (same id)", n, redelivered)
}

// checkCheckpoints: the log checkpoint events the webhook got verify with
// the log's key, and the last covers every record delivered.
func checkCheckpoints(t *testing.T, d *daemon, hook *hookReceiver, head int64) {
	t.Helper()
	_, keyText := httpGet(t, "http://"+d.http+"/.well-known/cardsign-log-key")
	keys, err := transparency.ParseVerifierKeys(strings.TrimSpace(string(keyText)))
	if err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, "a checkpoint of the whole log", 30*time.Second, func() bool {
		hook.mu.Lock()
		defer hook.mu.Unlock()
		if len(hook.checkpoints) == 0 {
			return false
		}
		cp, err := transparency.OpenCheckpoint(hook.checkpoints[len(hook.checkpoints)-1], keys)
		return err == nil && cp.Size == head
	})
	hook.mu.Lock()
	defer hook.mu.Unlock()
	for _, note := range hook.checkpoints {
		if _, err := transparency.OpenCheckpoint(note, keys); err != nil {
			t.Fatalf("a checkpoint event does not verify with the log's key: %v\n%s", err, note)
		}
	}
}
