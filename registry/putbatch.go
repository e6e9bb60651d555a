package registry

import (
	"context"
	"sync"

	"github.com/cardsign/cardsign/store"
)

// batchPutter is a store that writes several agent cards in one durable
// commit (store/sqlite). Re-signing writes each card it signed again as
// its agent's next version; one commit per card would bound it at the
// store's commits per second, whatever the backend's pace.
type batchPutter interface {
	PutAgentCards(ctx context.Context, cards []store.AgentCard, keep int) ([]store.AgentCard, []error, error)
}

// maxPutBatch bounds the cards one commit writes.
const maxPutBatch = 256

// putBatcher groups the re-signed cards written at the same time into one
// commit: the first writer commits what is queued, again until nothing is,
// while the others wait for their card's outcome.
type putBatcher struct {
	store batchPutter
	keep  int // versions kept of each agent's card

	mu      sync.Mutex
	queue   []*putRequest
	writing bool
}

// putRequest is one card waiting in a putBatcher.
type putRequest struct {
	card store.AgentCard
	done chan struct{}
	out  store.AgentCard
	err  error
}

// put writes c as PutAgentCard does, in a commit shared with the cards
// queued meanwhile.
func (b *putBatcher) put(ctx context.Context, c store.AgentCard) (store.AgentCard, error) {
	req := &putRequest{card: c, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, req)
	if b.writing {
		b.mu.Unlock()
		// Not cut short by ctx: the writer writes the card whatever
		// happens to this caller (its audit records are committed, and
		// the registry is to match them), and the caller must learn
		// that it was written (the served card and the catalog follow).
		<-req.done
		return req.out, req.err
	}
	b.writing = true
	for len(b.queue) > 0 {
		n := min(len(b.queue), maxPutBatch)
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		b.write(context.WithoutCancel(ctx), batch)
		b.mu.Lock()
	}
	b.writing = false
	b.mu.Unlock()
	return req.out, req.err
}

// write commits batch and tells each request its outcome.
func (b *putBatcher) write(ctx context.Context, batch []*putRequest) {
	cards := make([]store.AgentCard, len(batch))
	for i, r := range batch {
		cards[i] = r.card
	}
	out, errs, err := b.store.PutAgentCards(ctx, cards, b.keep)
	if err != nil && len(batch) > 1 {
		// The commit failed as a whole (one card's write, or the
		// store): each card again on its own, so that only what fails
		// fails.
		for _, r := range batch {
			b.write(ctx, []*putRequest{r})
		}
		return
	}
	for i, r := range batch {
		if err != nil {
			r.err = err
		} else {
			r.out, r.err = out[i], errs[i]
		}
		close(r.done)
	}
}
