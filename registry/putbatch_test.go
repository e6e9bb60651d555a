package registry

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/cardsign/cardsign/store"
)

// gatedPutter is a batchPutter whose first commit waits for a signal, so
// that the puts made meanwhile queue; it records each commit's cards.
type gatedPutter struct {
	gate    chan struct{}
	mu      sync.Mutex
	commits [][]string
	refuse  map[string]error // one card's own refusal
	fail    map[string]error // a card whose write fails the whole commit
}

func (g *gatedPutter) PutAgentCards(_ context.Context, cards []store.AgentCard, keep int) ([]store.AgentCard, []error, error) {
	g.mu.Lock()
	first := len(g.commits) == 0
	var ids []string
	for _, c := range cards {
		ids = append(ids, c.ID)
	}
	g.commits = append(g.commits, ids)
	g.mu.Unlock()
	if first {
		<-g.gate
	}
	for _, c := range cards {
		if err := g.fail[c.ID]; err != nil {
			return nil, nil, err
		}
	}
	out, errs := make([]store.AgentCard, len(cards)), make([]error, len(cards))
	for i, c := range cards {
		c.Version = int64(keep)
		out[i], errs[i] = c, g.refuse[c.ID]
	}
	return out, errs, nil
}

// putQueued puts c0, holds its commit at g's gate until c1..cN are
// queued behind it, opens the gate and returns each of c1..cN's result.
func putQueued(t *testing.T, g *gatedPutter, b *putBatcher, n int) ([]store.AgentCard, []error) {
	t.Helper()
	ctx := t.Context()
	first := make(chan error)
	go func() {
		_, err := b.put(ctx, store.AgentCard{ID: "c0"})
		first <- err
	}()
	for { // the first commit is under way
		g.mu.Lock()
		started := len(g.commits)
		g.mu.Unlock()
		if started == 1 {
			break
		}
		runtime.Gosched()
	}
	var wg sync.WaitGroup
	cards, errs := make([]store.AgentCard, n), make([]error, n)
	for i := range n {
		wg.Go(func() { cards[i], errs[i] = b.put(ctx, store.AgentCard{ID: fmt.Sprintf("c%d", i+1)}) })
	}
	for { // all queued behind the first commit
		b.mu.Lock()
		queued := len(b.queue)
		b.mu.Unlock()
		if queued == n {
			break
		}
		runtime.Gosched()
	}
	close(g.gate)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	return cards, errs
}

// TestPutBatcher: the cards put while a commit is under way share the next
// commit; each put learns its own card's outcome (a refusal of one card
// leaves the others written), and the keep is the registry's.
func TestPutBatcher(t *testing.T) {
	g := &gatedPutter{gate: make(chan struct{}), refuse: map[string]error{"c3": store.ErrSuperseded}}
	b := &putBatcher{store: g, keep: 7}
	cards, errs := putQueued(t, g, b, 5)
	for i, err := range errs {
		want := error(nil)
		if i+1 == 3 {
			want = store.ErrSuperseded
		}
		if !errors.Is(err, want) {
			t.Errorf("put c%d: %v, want %v", i+1, err, want)
		}
		if err == nil && (cards[i].ID != fmt.Sprintf("c%d", i+1) || cards[i].Version != 7) {
			t.Errorf("put c%d returned %s v%d", i+1, cards[i].ID, cards[i].Version)
		}
	}
	if len(g.commits) != 2 || len(g.commits[1]) != 5 {
		t.Fatalf("commits %v, want c0 alone then the five together", g.commits)
	}
}

// TestPutBatcherCommitFails: a commit that fails as a whole (one card's
// write failed) fails only that card: the others are written on their own.
func TestPutBatcherCommitFails(t *testing.T) {
	broken := errors.New("disk I/O error")
	g := &gatedPutter{gate: make(chan struct{}), fail: map[string]error{"c2": broken}}
	_, errs := putQueued(t, g, &putBatcher{store: g, keep: 1}, 3)
	for i, err := range errs {
		want := error(nil)
		if i+1 == 2 {
			want = broken
		}
		if !errors.Is(err, want) {
			t.Errorf("put c%d: %v, want %v", i+1, err, want)
		}
	}
	if len(g.commits) != 5 || len(g.commits[1]) != 3 {
		t.Fatalf("commits %v, want c0, the three together, then each alone", g.commits)
	}
}
