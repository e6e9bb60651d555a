package events

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
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

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/transparency"
)

// hook is a webhook receiver that can be down (503) and records the
// sequence numbers it took, in order.
type hook struct {
	*receiver
	down        atomic.Bool
	seqs        []int64
	checkpoints [][]byte // the log checkpoint events' notes
}

func newHook(t *testing.T, secret string) (*hook, string) {
	h := &hook{receiver: newReceiver(t, secret)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.receiver.ServeHTTP(w, r)
		h.mu.Lock()
		defer h.mu.Unlock()
		var e Event
		if err := json.Unmarshal(h.body[len(h.body)-1], &e); err != nil {
			t.Errorf("event: %v", err)
		}
		if e.Type == TypeLogCheckpoint {
			var c struct{ Data CheckpointData }
			_ = json.Unmarshal(h.body[len(h.body)-1], &c)
			h.checkpoints = append(h.checkpoints, []byte(c.Data.Checkpoint))
			return
		}
		h.seqs = append(h.seqs, e.Data.Seq)
	}))
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func (h *hook) got() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int64(nil), h.seqs...)
}

func appendRecords(t testing.TB, st store.Store, n int) {
	t.Helper()
	var recs []audit.Record
	for i := range n {
		recs = append(recs, audit.Record{Time: time.Now().UTC(), Caller: "token:ci", RequestID: fmt.Sprint(i), CardName: "Orders",
			CanonicalSHA256: digest(fmt.Sprint(i)), KID: "k1", Alg: "ES256", Profile: "spec", Signature: "c2ln"})
	}
	if _, err := st.AppendAudit(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
}

// leaseFence holds the duties lease for holder, as the daemon does.
func leaseFence(t testing.TB, st store.Store, holder string) Fence {
	l, err := st.AcquireLease(t.Context(), "duties", holder, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return func() (store.Lease, bool) { return l, true }
}

func waitSeqs(t *testing.T, h *hook, n int64) []int64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := h.got()
		if len(got) > 0 && got[len(got)-1] >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inOrder checks that seqs is 1..n in order, redeliveries aside.
func inOrder(t *testing.T, seqs []int64, n int64) {
	t.Helper()
	if _, err := testsupport.DeliveredInOrder(seqs, n); err != nil {
		t.Fatal(err)
	}
}

// TestDeliverFromTheAuditLog: a webhook and a file sink get every record,
// in order, from a real SQLite store; a receiver that is down only lags and
// catches up; the cursors are in the store; a filter's skipped records
// move its cursor too; a lost lease stops delivery.
func TestDeliverFromTheAuditLog(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cardsign.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendRecords(t, st, 150)
	secret := newSecret(t)
	h, url := newHook(t, secret)
	wh, err := NewWebhook(WebhookConfig{URL: url, Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	fileSink, err := NewFile(FileConfig{Path: filepath.Join(t.TempDir(), "events.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	keysOnly, _ := NewFilter([]string{"dev.cardsign.key.*"})
	keysFile, err := NewFile(FileConfig{Path: filepath.Join(t.TempDir(), "keys.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	lateFile, err := NewFile(FileConfig{Path: filepath.Join(t.TempDir(), "late.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDeliverer(st, testBuilder, []SinkConfig{
		{Name: "hook", Sink: wh},
		{Name: "file", Sink: fileSink},
		{Name: "keys", Filter: keysOnly, Sink: keysFile},
		{Name: "late", From: FromNow, Sink: lateFile},
	}, Options{Batch: 40, Poll: 50 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() { runErr = d.Run(rctx, leaseFence(t, st, "a")) })
	inOrder(t, waitSeqs(t, h, 150), 150)

	// Down for a while: signing goes on (appends), delivery lags, then
	// catches up.
	h.down.Store(true)
	for range 5 {
		appendRecords(t, st, 10)
		d.Wake()
		time.Sleep(30 * time.Millisecond)
	}
	h.down.Store(false)
	inOrder(t, waitSeqs(t, h, 200), 200)
	var failures int64
	for _, s := range d.Stats() {
		if s.Name == "hook" {
			failures = s.Failures
		}
	}
	if failures == 0 {
		t.Fatal("the receiver was down, and no failure was counted")
	}
	testsupportWait(t, func() bool {
		cs, _ := st.EventCursors(ctx)
		return len(cs) == 4 && cs[0].Seq == 200 && cs[1].Seq == 200 && cs[2].Seq == 200 && cs[3].Seq == 200
	})
	cs, _ := st.EventCursors(ctx)
	if cs[2].Sink != "keys" || cs[3].Sink != "late" {
		t.Fatalf("cursors %+v", cs)
	}
	// The file has every record in order; the filtered sink none (no key
	// records); the late sink only what came after its start.
	for path, want := range map[string]int{fileSink.cfg.Path: 200, keysFile.cfg.Path: 0, lateFile.cfg.Path: 50} {
		b, _ := os.ReadFile(path)
		if n := strings.Count(string(b), "\n"); n != want {
			t.Fatalf("%s has %d events, want %d", filepath.Base(path), n, want)
		}
	}
	// The lease taken by another replica: delivery stops.
	l, _ := st.AcquireLease(ctx, "duties", "a", time.Minute)
	if err := st.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AcquireLease(ctx, "duties", "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	appendRecords(t, st, 1)
	d.Wake()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("delivery went on after the lease was lost")
	}
	cancel()
	if !errors.Is(runErr, store.ErrLeaseLost) {
		t.Fatalf("Run: %v, want ErrLeaseLost", runErr)
	}
	// Record 201 may have reached the receiver before the fence refused its
	// cursor move (at least once): the cursor must not have moved past 200.
	if c, err := st.EventCursor(ctx, "hook"); err != nil || c.Seq != 200 {
		t.Fatalf("the hook's cursor after the lease was lost: %+v, %v; want 200", c, err)
	}
}

func testsupportWait(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDeliverAfterAnotherDeliverer: a deliverer whose lease was taken anew
// (another epoch: another replica may have delivered meanwhile) stops, and
// the next run goes on from the stored cursor, not from where it was.
func TestDeliverAfterAnotherDeliverer(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cardsign.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendRecords(t, st, 100)
	secret := newSecret(t)
	h, url := newHook(t, secret)
	wh, _ := NewWebhook(WebhookConfig{URL: url, Secrets: []string{secret}})
	d, err := NewDeliverer(st, testBuilder, []SinkConfig{{Name: "hook", Sink: wh}}, Options{Poll: 20 * time.Millisecond, MinBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	l, _ := st.AcquireLease(ctx, "duties", "a", time.Minute)
	cur := l
	fence := func() (store.Lease, bool) { mu.Lock(); defer mu.Unlock(); return cur, true }
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, fence) }()
	inOrder(t, waitSeqs(t, h, 100), 100)
	// Replica b takes the lease and delivers up to 150 elsewhere; then a
	// takes it back under a new epoch.
	if err := st.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	lb, err := st.AcquireLease(ctx, "duties", "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	appendRecords(t, st, 150)
	if err := st.AdvanceEventCursor(ctx, lb, "hook", 150); err != nil {
		t.Fatal(err)
	}
	_ = st.ReleaseLease(ctx, lb)
	la, err := st.AcquireLease(ctx, "duties", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	cur = la
	mu.Unlock()
	d.Wake()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotLeader) {
			t.Fatalf("Run after the lease was taken anew: %v, want ErrNotLeader", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run went on under a lease taken anew")
	}
	// The first run may have delivered some records before its cursor
	// move was refused (at least once); the second starts at 151.
	from := len(h.got())
	go func() { done <- d.Run(ctx, fence) }()
	got := waitSeqs(t, h, 250)
	for _, s := range got[from:] {
		if s <= 150 && s > 100 {
			t.Fatalf("record %d was delivered again although the stored cursor was past it", s)
		}
	}
	if got[len(got)-1] != 250 {
		t.Fatalf("delivered up to %d, want 250", got[len(got)-1])
	}
}

// TestDeliverCheckpoints: a sink that takes log checkpoint events gets the
// log's signed checkpoint of what it took once it caught up, which verifies
// with the log's key; one refused is sent again; records never wait for it.
func TestDeliverCheckpoints(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cardsign.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendRecords(t, st, 30)
	signer, err := transparency.NewSigner("cardsign.example.com/log", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := transparency.ParseVerifierKeys(strings.Join(signer.SigningKeys(), "\n"))
	if err != nil {
		t.Fatal(err)
	}
	cp := transparency.NewCheckpointer(signer, st)
	secret := newSecret(t)
	h, url := newHook(t, secret)
	wh, _ := NewWebhook(WebhookConfig{URL: url, Secrets: []string{secret}})
	d, err := NewDeliverer(st, testBuilder, []SinkConfig{{Name: "hook", Sink: wh}},
		Options{Poll: 20 * time.Millisecond, MinBackoff: 10 * time.Millisecond, Checkpoint: cp.CheckpointAt, CheckpointEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = d.Run(rctx, leaseFence(t, st, "a")) }()
	inOrder(t, waitSeqs(t, h, 30), 30)
	last := func() (transparency.Checkpoint, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.checkpoints) == 0 {
			return transparency.Checkpoint{}, errors.New("none yet")
		}
		return transparency.OpenCheckpoint(h.checkpoints[len(h.checkpoints)-1], keys)
	}
	testsupportWait(t, func() bool { c, err := last(); return err == nil && c.Size == 30 })
	// Down while records come: they wait for the receiver, the checkpoint
	// too; back up, both arrive.
	h.down.Store(true)
	appendRecords(t, st, 5)
	d.Wake()
	time.Sleep(100 * time.Millisecond)
	h.down.Store(false)
	inOrder(t, waitSeqs(t, h, 35), 35)
	testsupportWait(t, func() bool { c, err := last(); return err == nil && c.Size == 35 })
	h.mu.Lock()
	n := len(h.checkpoints)
	h.mu.Unlock()
	if n > 4 {
		t.Fatalf("%d checkpoints for 2 catch-ups: one per catch-up at most every CheckpointEvery", n)
	}
}
