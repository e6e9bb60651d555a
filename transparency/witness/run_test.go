package witness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/witnesstest"
	"github.com/cardsign/cardsign/transparency"
)

// waitFor waits until cond holds, waking on each stored size; it fails the
// test after a generous bound (a wait, not a timing).
func waitFor(t *testing.T, obs *observer, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-obs.storedC:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("waited 30s for %s", what)
		}
	}
}

// Run keeps the witnesses at the log's size as it grows (on Wake and on
// its poll: another replica's commits), goes on while a witness is down,
// and brings it back once it restarts.
func TestRun(t *testing.T) {
	l := newLog(t, logKey(t), "")
	lws, eps, p := witnesses(t, l, 3, 2)
	st, obs := newCosigStore(t), newObserver()
	c := collector(t, l, st, eps, p, Options{Observer: obs, RequestTimeout: time.Second, PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
	all := []string{"witness.example/w1", "witness.example/w2", "witness.example/w3"}
	cosignedBy := func(size int64, want []string) func() bool {
		return func() bool { return slices.Equal(st.of(size), want) }
	}
	l.grow(t, 4)
	c.Wake()
	waitFor(t, obs, "all three at 4", cosignedBy(4, all))
	for range 5 { // commits in a row: each witness is sent the newest size it finds
		l.grow(t, 1)
		c.Wake()
	}
	waitFor(t, obs, "all three at 9", cosignedBy(9, all))
	checkWitnessed(t, l, st, p, 9)

	lws[0].Kill()
	l.grow(t, 3) // no Wake: the poll finds it
	waitFor(t, obs, "w2 and w3 at 12", cosignedBy(12, all[1:]))
	checkWitnessed(t, l, st, p, 12)
	lws[0].Restart()
	waitFor(t, obs, "w1 back at 12", cosignedBy(12, all))
	for i, s := range c.Status() {
		if s.Size != 12 {
			t.Fatalf("witness %d's status: %+v", i+1, s)
		}
	}
}

// A witness that hangs holds nobody back: the others follow the log
// through several sizes while its one request is still waiting.
func TestRunSlowWitness(t *testing.T) {
	l := newLog(t, logKey(t), "")
	_, real, _ := witnesses(t, l, 2, 2)
	slow := witnesstest.NewKey(t, "witness.example/slow")
	var requests atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "gave up", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	eps := append(slices.Clone(real), endpoint(t, slow.VKey, srv.URL))
	p, err := transparency.NewWitnessPolicy([]string{real[0].Key, real[1].Key, slow.VKey}, 2)
	if err != nil {
		t.Fatal(err)
	}
	st, obs := newCosigStore(t), newObserver()
	c := collector(t, l, st, eps, p, Options{Observer: obs, RequestTimeout: time.Minute, PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for size := int64(3); size <= 12; size += 3 {
		l.grow(t, 3)
		c.Wake()
		waitFor(t, obs, fmt.Sprint("w1 and w2 at ", size), func() bool {
			return slices.Equal(st.of(size), []string{"witness.example/w1", "witness.example/w2"})
		})
	}
	checkWitnessed(t, l, st, p, 12)
	waitFor(t, obs, "the slow witness's request", func() bool { return requests.Load() > 0 })
	if n := requests.Load(); n != 1 {
		t.Fatalf("the slow witness got %d requests, want its first still waiting", n)
	}
}
