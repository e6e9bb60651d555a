package audit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
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

// DefaultMaxWait bounds how long a record waits in the queue for records
// announced by Expect before its transaction starts.
const DefaultMaxWait = 2 * time.Millisecond

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
// Callers that announce their records with Expect before the work that
// produces them (signing) make the groups larger: while announced records
// are on their way, the next transaction waits for them, up to maxWait after
// the oldest queued record arrived, unless the queue already holds maxBatch
// records. A caller that announced nothing never waits: with nobody else
// signing, a record is committed at once. Every transaction has a fixed cost
// (with SQLite: the head read, the WAL frames and an fsync), so under load
// larger groups cost less CPU per record.
//
// One goroutine runs the transactions, one at a time. A Batcher must be
// closed to stop it.
type Batcher struct {
	c        Committer
	maxBatch int
	maxWait  time.Duration
	onCommit func([]Record)

	mu       sync.Mutex
	queue    []*request // waiting for a transaction, oldest first
	expected int        // records announced by Expect, not yet queued or given up
	closed   bool

	wake chan struct{} // capacity 1: "the queue or closed changed"
	done chan struct{} // closed when the loop has drained the queue and exited
}

// request is one Commit call. taken and canceled are guarded by Batcher.mu:
// whichever of the loop (taken) and the caller (canceled) gets there first
// decides whether the records are committed or dropped.
type request struct {
	recs     []Record
	queued   time.Time
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
	return NewBatcherWith(c, BatcherOptions{MaxBatch: maxBatch})
}

// BatcherOptions configure NewBatcherWith.
type BatcherOptions struct {
	// MaxBatch is the most records per transaction (<= 0: DefaultMaxBatch).
	MaxBatch int
	// OnCommit, when set, sees every committed transaction's records, in
	// order, before any Commit call among them returns: what one caller
	// learns from it (the transparency log's new size) is there for all.
	OnCommit func([]Record)
}

// NewBatcherWith is NewBatcher with every option.
func NewBatcherWith(c Committer, o BatcherOptions) *Batcher {
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	b := &Batcher{
		c:        c,
		maxBatch: o.MaxBatch,
		maxWait:  DefaultMaxWait,
		onCommit: o.OnCommit,
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
	return b.commitExpected(ctx, recs, nil)
}

// Expected is a Commit announced by Expect.
type Expected struct {
	b    *Batcher
	done bool // guarded by b.mu
}

// Expect announces a Commit call on its way, so that transactions starting
// meanwhile may wait for it (at most the Batcher's maximum wait). The caller
// must end the announcement with Expected.Commit or Expected.Done.
func (b *Batcher) Expect() *Expected {
	b.mu.Lock()
	b.expected++
	b.mu.Unlock()
	return &Expected{b: b}
}

// Done withdraws the announcement, if Commit has not already: call it (with
// defer) on every path that does not commit.
func (e *Expected) Done() {
	e.b.mu.Lock()
	changed := e.end()
	e.b.mu.Unlock()
	if changed {
		e.b.signal()
	}
}

// end withdraws the announcement once; the caller holds b.mu.
func (e *Expected) end() bool {
	if e.done {
		return false
	}
	e.done = true
	e.b.expected--
	return true
}

// Commit is Batcher.Commit for the announced records: queueing them and
// withdrawing the announcement are one step.
func (e *Expected) Commit(ctx context.Context, recs []Record) ([]Record, error) {
	return e.b.commitExpected(ctx, recs, e)
}

func (b *Batcher) commitExpected(ctx context.Context, recs []Record, e *Expected) ([]Record, error) {
	if e != nil {
		defer e.Done()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, nil
	}
	req := &request{recs: slices.Clone(recs), queued: time.Now(), result: make(chan result, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	b.queue = append(b.queue, req)
	if e != nil {
		e.end()
	}
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
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		// Let the goroutines that are ready to run go first: under load
		// they are calls about to queue their records (with one CPU, a
		// signal from Commit would otherwise run this loop at once, and
		// every transaction would carry one or two records). When nothing
		// else is ready, Gosched returns at once.
		runtime.Gosched()
		batch, wait, stop := b.next()
		if stop {
			return
		}
		if len(batch) > 0 {
			b.commit(batch)
			continue
		}
		if wait <= 0 {
			<-b.wake
			continue
		}
		timer.Reset(wait)
		select {
		case <-b.wake:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// next takes the next batch from the queue, marking its requests taken.
// While announced records are on their way it takes nothing and says how long
// the oldest queued record may still wait (wait > 0). stop reports that the
// Batcher is closed and the queue empty.
func (b *Batcher) next() (batch []*request, wait time.Duration, stop bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if wait = b.waitFor(); wait > 0 {
		return nil, wait, false
	}
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
	return batch, 0, len(batch) == 0 && len(b.queue) == 0 && b.closed
}

// waitFor says how much longer the next transaction waits for announced
// records: not at all when none is announced, nothing is queued, the queue
// already fills a transaction, the Batcher is closing, or the oldest queued
// record has waited maxWait. The caller holds b.mu.
func (b *Batcher) waitFor() time.Duration {
	if b.expected <= 0 || b.closed || b.maxWait <= 0 {
		return 0
	}
	var oldest time.Time
	n := 0
	for _, req := range b.queue {
		if req.canceled {
			continue
		}
		if oldest.IsZero() {
			oldest = req.queued
		}
		n += len(req.recs)
	}
	if n == 0 || n >= b.maxBatch {
		return 0
	}
	return b.maxWait - time.Since(oldest)
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
	} else if b.onCommit != nil {
		b.onCommit(out)
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
