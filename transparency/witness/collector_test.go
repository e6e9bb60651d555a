package witness

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/witnesstest"
	"github.com/cardsign/cardsign/transparency"
)

// Three witnesses, quorum two: every round brings each to the log's newest
// size, and their cosignatures make the checkpoint pass the policy.
func TestRoundCosigns(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, logKey(t), "")
	lws, eps, p := witnesses(t, l, 3, 2)
	st, obs := newCosigStore(t), newObserver()
	c := collector(t, l, st, eps, p, Options{Observer: obs})
	all := []string{"witness.example/w1", "witness.example/w2", "witness.example/w3"}
	for round, grow := range []int{5, 3, 1, 20} {
		l.grow(t, grow)
		if err := c.Round(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		size := int64(l.n)
		if got := st.of(size); !slices.Equal(got, all) {
			t.Fatalf("round %d: cosignatures of %d by %v, want %v", round, size, got, all)
		}
		checkWitnessed(t, l, st, p, size)
		for i, w := range lws {
			if got := w.Size(origin); got != size {
				t.Fatalf("round %d: witness %d is at %d, want %d", round, i+1, got, size)
			}
		}
		for _, s := range c.Status() {
			if s.Size != size || s.LastError != "" || s.Conflict != nil || s.LastSuccess.IsZero() {
				t.Fatalf("round %d: status %+v", round, s)
			}
		}
		// Only the newest quorum size is kept (Round prunes).
		for _, cs := range st.all(t) {
			if cs.Size != size {
				t.Fatalf("round %d: a cosignature of %d outlived the prune below %d", round, cs.Size, size)
			}
		}
	}
	// A round with nothing new asks nobody.
	before := len(obs.answersOf())
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if after := len(obs.answersOf()); after != before {
		t.Fatalf("a round at the same size sent %d requests", after-before)
	}
}

// A killed witness stays behind while the quorum keeps being met, and
// catches up from its size once it is back. A new lease holder that knows
// nothing (an empty store) learns each witness's size from its 409.
func TestKilledWitnessCatchesUp(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, logKey(t), "")
	lws, eps, p := witnesses(t, l, 3, 2)
	st, obs := newCosigStore(t), newObserver()
	c := collector(t, l, st, eps, p, Options{Observer: obs, RequestTimeout: 2 * time.Second})
	l.grow(t, 5)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	lws[2].Kill()
	for range 3 {
		l.grow(t, 4)
		err := c.Round(ctx)
		if err == nil || !strings.Contains(err.Error(), `"witness.example/w3"`) {
			t.Fatalf("a round with w3 down: %v", err)
		}
		if got := st.of(int64(l.n)); !slices.Equal(got, []string{"witness.example/w1", "witness.example/w2"}) {
			t.Fatalf("cosignatures of %d by %v", l.n, got)
		}
		checkWitnessed(t, l, st, p, int64(l.n))
	}
	if s := c.Status()[2]; s.Size != 5 || s.LastError == "" {
		t.Fatalf("w3's status while down: %+v", s)
	}
	lws[2].Restart()
	if err := c.Round(ctx); err != nil {
		t.Fatalf("the round after w3's restart: %v", err)
	}
	if got := lws[2].Size(origin); got != int64(l.n) {
		t.Fatalf("w3 is at %d after its restart, want %d", got, l.n)
	}
	if s := c.Status()[2]; s.Size != int64(l.n) || s.LastError != "" {
		t.Fatalf("w3's status after catching up: %+v", s)
	}

	// Another replica takes the lease with no cosignature stored: every
	// witness answers 409 with its size, and is asked again from there.
	l.grow(t, 2)
	st2, obs2 := newCosigStore(t), newObserver()
	c2 := collector(t, l, st2, eps, p, Options{Observer: obs2})
	if err := c2.Round(ctx); err != nil {
		t.Fatal(err)
	}
	checkWitnessed(t, l, st2, p, int64(l.n))
	var refused int
	for _, a := range obs2.answersOf() {
		if errors.Is(a.err, ErrRefused) && strings.Contains(a.err.Error(), "knows size") {
			refused++
		}
	}
	if refused != 3 {
		t.Fatalf("%d answers of 409 to a collector that knew nothing, want 3: %+v", refused, obs2.answersOf())
	}
}

// A witness registered late (at size 0, the log at 50) is brought to the
// log's size; so is one that lost its state (back at 0 while the store has
// its cosignature of 30): both answer 409 with a size below the one the
// collector assumed.
func TestLateWitnessCatchesUp(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, logKey(t), "")
	lws, eps, _ := witnesses(t, l, 2, 1)
	late := witnesstest.Start(t, "witness.example/late")
	eps = append(eps, endpoint(t, late.VKey, late.URL))
	p, err := transparency.NewWitnessPolicy([]string{lws[0].VKey, lws[1].VKey, late.VKey}, 2)
	if err != nil {
		t.Fatal(err)
	}
	st := newCosigStore(t)
	c := collector(t, l, st, eps, p, Options{})
	l.grow(t, 30)
	if err := c.Round(ctx); err == nil || !strings.Contains(err.Error(), "register the log") {
		t.Fatalf("a round with a witness that does not know the log: %v", err)
	}
	if got := c.Status()[2].LastError; !strings.Contains(got, "404") {
		t.Fatalf("the unregistered witness's status: %q", got)
	}
	l.grow(t, 20)
	late.AddLog(origin, l.vkey())
	lws[1].Wipe()
	lws[1].AddLog(origin, l.vkey())
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"witness.example/late", "witness.example/w1", "witness.example/w2"}
	if got := st.of(50); !slices.Equal(got, want) {
		t.Fatalf("cosignatures of 50 by %v, want %v", got, want)
	}
	checkWitnessed(t, l, st, p, 50)
}
