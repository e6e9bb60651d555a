package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrClosed is returned by Commit after Close.
var ErrClosed = errors.New("audit: batcher closed")

// ErrRecordRejected is wrapped by a Committer's error when the store refused
// particular records (a signature by a revoked key) rather than failed: the
// Batcher then commits each Commit call of the batch on its own, so one
// caller's refused record does not fail the others.
var ErrRecordRejected = errors.New("audit: record rejected by the store")

// DefaultMaxBatch is the largest number of records NewBatcher puts in one
// transaction when given maxBatch <= 0.
const DefaultMaxBatch = 512

// Committer is what the store provides.
type Committer interface {
	// AppendAudit appends recs in one durable transaction, assigning Seq,
	// PrevHash and Hash from the current chain head, and returns them as
	// stored, in order.
	AppendAudit(ctx context.Context, recs []Record) ([]Record, error)
}

// Batcher commits records in groups: concurrent Commit calls that arrive while
// a transaction is in flight are committed together in the next one, so
// durability (an fsync per transaction) does not cap throughput.
//
// One goroutine runs the transactions, one at a time. A Batcher must be
// closed to stop it.
type Batcher struct {
	c        Committer
	maxBatch int

	mu     sync.Mutex
	queue  []*request // waiting for a transaction, oldest first
	closed bool

	wake chan struct{} // capacity 1: "the queue or closed changed"
	done chan struct{} // closed when the loop has drained the queue and exited
}

// request is one Commit call. taken and canceled are guarded by Batcher.mu:
// whichever of the loop (taken) and the caller (canceled) gets there first
// decides whether the records are committed or dropped.
type request struct {
	recs     []Record
	taken    bool
	canceled bool
	result   chan result // capacity 1, written once by the loop
}

type result struct {
	recs []Record
	err  error
}

// NewBatcher starts a Batcher committing to c at most maxBatch records per
// transaction (maxBatch <= 0 means DefaultMaxBatch). The records of one
// Commit call always share a transaction, so a call with more than maxBatch
// records gets a transaction to itself.
func NewBatcher(c Committer, maxBatch int) *Batcher {
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	b := &Batcher{
		c:        c,
		maxBatch: maxBatch,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	go b.loop()
	return b
}

// Commit queues recs and returns them as committed (with Seq, PrevHash and
// Hash) only once they are durable. If ctx ends before their transaction
// starts, the records are dropped and ctx.Err() is returned. Once handed to a
// transaction they are committed or the call fails with that transaction's
// error, whatever ctx does meanwhile: the caller always learns which. After
// Close, Commit returns ErrClosed.
func (b *Batcher) Commit(ctx context.Context, recs []Record) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, nil
	}
	req := &request{recs: slices.Clone(recs), result: make(chan result, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	b.queue = append(b.queue, req)
	b.mu.Unlock()
	b.signal()

	select {
	case r := <-req.result:
		return r.recs, r.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	if !req.taken {
		req.canceled = true
		b.mu.Unlock()
		return nil, ctx.Err()
	}
	b.mu.Unlock()
	// Already in a transaction: its outcome is the answer, not ctx.
	r := <-req.result
	return r.recs, r.err
}

// Close stops accepting records, commits everything already queued, and
// waits for it. Calling Close again waits likewise and returns nil.
func (b *Batcher) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.signal()
	<-b.done
	return nil
}

func (b *Batcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default: // a wake-up is already pending; the loop will see our change
	}
}

// loop runs transactions until Close, each with everything queued (up to
// maxBatch records) while the one before it ran.
func (b *Batcher) loop() {
	defer close(b.done)
	for {
		batch, stop := b.next()
		if stop {
			return
		}
		if len(batch) > 0 {
			b.commit(batch)
			continue
		}
		<-b.wake
	}
}

// next takes the next batch from the queue, marking its requests taken.
// stop reports that the Batcher is closed and the queue empty.
func (b *Batcher) next() (batch []*request, stop bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, i := 0, 0
	for ; i < len(b.queue); i++ {
		req := b.queue[i]
		if req.canceled {
			continue
		}
		if len(batch) > 0 && n+len(req.recs) > b.maxBatch {
			break
		}
		req.taken = true
		batch = append(batch, req)
		n += len(req.recs)
	}
	clear(b.queue[:i]) // drop references so committed records can be collected
	b.queue = b.queue[i:]
	return batch, len(batch) == 0 && len(b.queue) == 0 && b.closed
}

// commit runs one transaction for batch and hands each request its share of
// the result. The transaction does not use any caller's context: one caller
// giving up must not fail the others sharing it.
func (b *Batcher) commit(batch []*request) {
	if len(batch) > 1 && b.commitTogether(batch) {
		return
	}
	for _, req := range batch {
		b.commitTogether([]*request{req})
	}
}

// commitTogether commits batch in one transaction and hands each request its
// share of the result. When the store rejected some record of a batch of
// several requests, it hands out nothing and returns false: the caller
// commits each request alone.
func (b *Batcher) commitTogether(batch []*request) bool {
	var all []Record
	for _, req := range batch {
		all = append(all, req.recs...)
	}
	out, err := b.c.AppendAudit(context.Background(), all)
	if err == nil && len(out) != len(all) {
		err = fmt.Errorf("audit: store returned %d records for %d appended", len(out), len(all))
	}
	if err != nil && len(batch) > 1 && errors.Is(err, ErrRecordRejected) {
		return false
	}
	if err != nil {
		err = fmt.Errorf("audit: commit %d records: %w", len(all), err)
	}
	off := 0
	for _, req := range batch {
		var r result
		if err != nil {
			r.err = err
		} else {
			// A full slice expression, so a caller appending to its records
			// cannot overwrite the next caller's.
			r.recs = out[off : off+len(req.recs) : off+len(req.recs)]
		}
		off += len(req.recs)
		req.result <- r
	}
	return true
}
