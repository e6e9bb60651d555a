package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
)

// memCommitter is a real in-memory audit store: it chains records exactly as a
// durable store must, and counts transactions.
type memCommitter struct {
	delay time.Duration // per transaction, standing in for an fsync
	// fail, when set, decides whether transaction n (1-based) fails; a failed
	// transaction changes nothing.
	fail func(n int) bool
	// reject, when set, makes a transaction holding a record it reports
	// fail with ErrRecordRejected, as a store refuses a revoked key's record.
	reject func(Record) bool
	// gate, when set, is received from before each transaction runs, after
	// sending on started, so a test can hold a transaction in flight.
	started chan []Record
	gate    chan struct{}

	mu       sync.Mutex
	recs     []Record
	txns     int
	maxSize  int
	failed   map[string]int // RequestID -> failed transaction number
	inFlight atomic.Int32
	overlap  atomic.Bool // two transactions ran at once
}

var errInjected = errors.New("injected failure")

func (m *memCommitter) AppendAudit(ctx context.Context, recs []Record) ([]Record, error) {
	if m.inFlight.Add(1) > 1 {
		m.overlap.Store(true)
	}
	defer m.inFlight.Add(-1)
	if m.started != nil {
		m.started <- recs
	}
	if m.gate != nil {
		<-m.gate
	}
	if m.delay > 0 {
		time.Sleep(m.delay)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.txns++
	m.maxSize = max(m.maxSize, len(recs))
	if m.fail != nil && m.fail(m.txns) {
		if m.failed == nil {
			m.failed = map[string]int{}
		}
		for _, r := range recs {
			m.failed[r.RequestID] = m.txns
		}
		return nil, fmt.Errorf("txn %d: %w", m.txns, errInjected)
	}
	for _, r := range recs {
		if m.reject != nil && m.reject(r) {
			return nil, fmt.Errorf("txn %d: record %s: %w", m.txns, r.RequestID, ErrRecordRejected)
		}
	}
	prev := Genesis()
	if len(m.recs) > 0 {
		prev = m.recs[len(m.recs)-1].Hash
	}
	out := make([]Record, len(recs))
	for i, r := range recs {
		r.Seq = int64(len(m.recs) + 1)
		r.PrevHash = prev
		r.Hash = r.ComputeHash(prev)
		prev = r.Hash
		m.recs = append(m.recs, r)
		out[i] = r
	}
	return out, nil
}

func (m *memCommitter) snapshot() (recs []Record, txns int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Record(nil), m.recs...), m.txns
}

func rec(id string) Record {
	r := sampleRecord()
	r.RequestID = id
	return r
}

// queued reports how many requests wait in b's queue.
func queued(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

func TestBatcherConcurrent(t *testing.T) {
	const goroutines, perG, maxBatch = 64, 200, 100
	m := &memCommitter{delay: 100 * time.Microsecond}
	b := NewBatcher(m, maxBatch)
	defer b.Close()

	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	got := make([][]Record, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				// Every 10th call commits two records, which must stay together.
				recs := []Record{rec(fmt.Sprintf("g%d-%d", g, i))}
				if i%10 == 0 {
					recs = append(recs, rec(fmt.Sprintf("g%d-%d-b", g, i)))
				}
				out, err := b.Commit(t.Context(), recs)
				if err != nil {
					errs <- err
					return
				}
				if len(out) != len(recs) {
					errs <- fmt.Errorf("got %d records back for %d", len(out), len(recs))
					return
				}
				for j := range out {
					if out[j].RequestID != recs[j].RequestID || len(out[j].Hash) != HashSize {
						errs <- fmt.Errorf("record %d back is %+v, want %s hashed", j, out[j], recs[j].RequestID)
						return
					}
				}
				if len(out) == 2 && out[1].Seq != out[0].Seq+1 {
					errs <- fmt.Errorf("one call's records split: seqs %d, %d", out[0].Seq, out[1].Seq)
					return
				}
				got[g] = append(got[g], out...)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	chain, txns := m.snapshot()
	const commits = goroutines * perG
	const records = commits + goroutines*perG/10
	if len(chain) != records {
		t.Fatalf("store holds %d records, want %d", len(chain), records)
	}
	if err := VerifyChain(Genesis(), chain); err != nil {
		t.Fatalf("VerifyChain: %v", err)
	}
	// What callers were told is what the store holds.
	for _, recs := range got {
		for _, r := range recs {
			if s := chain[r.Seq-1]; s.RequestID != r.RequestID || !bytes.Equal(s.Hash, r.Hash) {
				t.Fatalf("caller got seq %d as %s, store has %s", r.Seq, r.RequestID, s.RequestID)
			}
		}
	}
	if txns >= commits {
		t.Fatalf("%d transactions for %d commits: no batching", txns, commits)
	}
	if m.maxSize > maxBatch {
		t.Fatalf("a transaction held %d records, maxBatch is %d", m.maxSize, maxBatch)
	}
	if m.overlap.Load() {
		t.Fatal("two transactions ran at once")
	}
	t.Logf("%d commits (%d records) in %d transactions", commits, records, txns)
}

func TestBatcherFailedTransactionFailsItsCallersOnly(t *testing.T) {
	const goroutines, perG = 32, 50
	m := &memCommitter{delay: 50 * time.Microsecond, fail: func(n int) bool { return n%3 == 0 }}
	b := NewBatcher(m, 0)
	defer b.Close()

	type outcome struct {
		id  string
		err error
	}
	outcomes := make(chan outcome, goroutines*perG)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				id := fmt.Sprintf("g%d-%d", g, i)
				_, err := b.Commit(t.Context(), []Record{rec(id)})
				outcomes <- outcome{id, err}
			}
		})
	}
	wg.Wait()
	close(outcomes)

	chain, _ := m.snapshot()
	if err := VerifyChain(Genesis(), chain); err != nil {
		t.Fatalf("VerifyChain: %v", err)
	}
	stored := map[string]bool{}
	for _, r := range chain {
		stored[r.RequestID] = true
	}
	nFailed := 0
	for o := range outcomes {
		txn, inFailed := m.failed[o.id]
		switch {
		case inFailed:
			nFailed++
			want := fmt.Sprintf("txn %d: ", txn)
			if !errors.Is(o.err, errInjected) || !bytes.Contains([]byte(o.err.Error()), []byte(want)) {
				t.Errorf("%s was in failed transaction %d, Commit returned %v", o.id, txn, o.err)
			}
			if stored[o.id] {
				t.Errorf("%s failed but is stored", o.id)
			}
		case o.err != nil:
			t.Errorf("%s was in no failed transaction, Commit returned %v", o.id, o.err)
		case !stored[o.id]:
			t.Errorf("%s succeeded but is not stored", o.id)
		}
	}
	if nFailed == 0 {
		t.Fatal("no transaction failed: the test tested nothing")
	}
}

func TestBatcherContext(t *testing.T) {
	m := &memCommitter{started: make(chan []Record, 8), gate: make(chan struct{})}
	b := NewBatcher(m, 0)
	t.Cleanup(func() { b.Close() })
	// Runs before Close (cleanups are LIFO): a failing test must not leave
	// a transaction held, or Close would hang instead of the test failing.
	t.Cleanup(func() { close(m.gate) })

	// A holds the first transaction open.
	ctxA, cancelA := context.WithCancel(t.Context())
	aDone := make(chan error, 1)
	go func() {
		_, err := b.Commit(ctxA, []Record{rec("A")})
		aDone <- err
	}()
	<-m.started

	// B queues behind it, then gives up before its transaction starts.
	ctxB, cancelB := context.WithCancel(t.Context())
	bDone := make(chan error, 1)
	go func() {
		_, err := b.Commit(ctxB, []Record{rec("B")})
		bDone <- err
	}()
	testsupport.WaitFor(t, "B queued", 5*time.Second, func() bool { return queued(b) == 1 })
	cancelB()
	if err := <-bDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("B: Commit = %v, want context.Canceled", err)
	}

	// A gives up after its transaction started: it must still learn the outcome.
	cancelA()
	select {
	case err := <-aDone:
		t.Fatalf("A returned (%v) while its transaction was still in flight", err)
	case <-time.After(20 * time.Millisecond):
	}
	m.gate <- struct{}{}
	if err := <-aDone; err != nil {
		t.Fatalf("A: Commit = %v, want its committed transaction's nil", err)
	}

	// C commits normally; B must never reach the store.
	cDone := make(chan error, 1)
	go func() {
		_, err := b.Commit(t.Context(), []Record{rec("C")})
		cDone <- err
	}()
	if recs := <-m.started; len(recs) != 1 || recs[0].RequestID != "C" {
		t.Fatalf("second transaction holds %v, want only C", recs)
	}
	m.gate <- struct{}{}
	if err := <-cDone; err != nil {
		t.Fatalf("C: %v", err)
	}
	chain, _ := m.snapshot()
	if len(chain) != 2 || chain[0].RequestID != "A" || chain[1].RequestID != "C" {
		t.Fatalf("store holds %d records, want A, C", len(chain))
	}

	// An already-ended context commits nothing.
	if _, err := b.Commit(ctxB, []Record{rec("D")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with ended ctx = %v", err)
	}
}

func TestBatcherCloseDrains(t *testing.T) {
	m := &memCommitter{started: make(chan []Record, 64), gate: make(chan struct{})}
	b := NewBatcher(m, 4)
	release := sync.OnceFunc(func() { close(m.gate) }) // lets every transaction run
	t.Cleanup(func() { b.Close() })
	t.Cleanup(release) // before Close, see TestBatcherContext

	const n = 10
	errs := make(chan error, n)
	go func() {
		_, err := b.Commit(t.Context(), []Record{rec("first")})
		errs <- err
	}()
	<-m.started // first transaction in flight, held
	for i := range n - 1 {
		go func() {
			_, err := b.Commit(t.Context(), []Record{rec(fmt.Sprintf("q%d", i))})
			errs <- err
		}()
	}
	testsupport.WaitFor(t, "commits queued", 5*time.Second, func() bool { return queued(b) == n-1 })

	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	testsupport.WaitFor(t, "Close to stop accepting", 5*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.closed
	})
	if _, err := b.Commit(t.Context(), []Record{rec("late")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit during Close = %v, want ErrClosed", err)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with records still queued", err)
	case <-time.After(20 * time.Millisecond):
	}

	release()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("queued Commit: %v", err)
		}
	}
	chain, txns := m.snapshot()
	if len(chain) != n {
		t.Fatalf("store holds %d records after Close, want %d", len(chain), n)
	}
	if err := VerifyChain(Genesis(), chain); err != nil {
		t.Fatal(err)
	}
	if txns != 4 {
		t.Errorf("%d transactions, want 4 (1 + 9 records in batches of at most 4)", txns)
	}
	if _, err := b.Commit(t.Context(), []Record{rec("after")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close = %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestBatcherOversizedCallGetsOwnTransaction(t *testing.T) {
	m := &memCommitter{}
	b := NewBatcher(m, 2)
	defer b.Close()
	out, err := b.Commit(t.Context(), []Record{rec("a"), rec("b"), rec("c")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0].Seq != 1 || out[2].Seq != 3 {
		t.Fatalf("got %+v", out)
	}
	if _, txns := m.snapshot(); txns != 1 {
		t.Fatalf("%d transactions, want 1: a call's records must not be split", txns)
	}
}

// shortCommitter returns fewer records than it was given.
type shortCommitter struct{}

func (shortCommitter) AppendAudit(_ context.Context, recs []Record) ([]Record, error) {
	return recs[:len(recs)-1], nil
}

func TestBatcherShortResultIsAnError(t *testing.T) {
	b := NewBatcher(shortCommitter{}, 0)
	defer b.Close()
	if _, err := b.Commit(t.Context(), []Record{rec("a")}); err == nil {
		t.Fatal("Commit succeeded though the store returned no record")
	}
}

// TestBatcherRejectedRecord: a record the store rejects (a signature by a key
// revoked meanwhile) fails its own Commit call only; the calls that shared its
// transaction are committed on their own.
func TestBatcherRejectedRecord(t *testing.T) {
	m := &memCommitter{
		started: make(chan []Record, 16), gate: make(chan struct{}),
		reject: func(r Record) bool { return r.RequestID == "bad" },
	}
	b := NewBatcher(m, 0)
	t.Cleanup(func() { b.Close() })
	t.Cleanup(func() { close(m.gate) })

	first := make(chan error, 1)
	go func() {
		_, err := b.Commit(t.Context(), []Record{rec("first")})
		first <- err
	}()
	<-m.started // "first" holds the transaction while the others queue
	ids := []string{"a", "bad", "c"}
	errs := make([]chan error, len(ids))
	for i, id := range ids {
		errs[i] = make(chan error, 1)
		go func() {
			_, err := b.Commit(t.Context(), []Record{rec(id)})
			errs[i] <- err
		}()
	}
	testsupport.WaitFor(t, "three calls queued", 5*time.Second, func() bool { return queued(b) == 3 })
	m.gate <- struct{}{}
	if err := <-first; err != nil {
		t.Fatalf("first: %v", err)
	}
	if batch := <-m.started; len(batch) != 3 {
		t.Fatalf("second transaction holds %d records, want the 3 queued", len(batch))
	}
	m.gate <- struct{}{}
	for range ids { // then one transaction per call
		select {
		case <-m.started:
			m.gate <- struct{}{}
		case <-time.After(5 * time.Second):
			t.Fatal("the calls of a batch with a rejected record were not committed one by one")
		}
	}
	for i, id := range ids {
		err := <-errs[i]
		switch {
		case id == "bad" && !errors.Is(err, ErrRecordRejected):
			t.Errorf("%s: Commit = %v, want ErrRecordRejected", id, err)
		case id != "bad" && err != nil:
			t.Errorf("%s: Commit = %v, want committed: another call's rejected record must not fail it", id, err)
		}
	}
	chain, _ := m.snapshot()
	var got []string
	for _, r := range chain {
		got = append(got, r.RequestID)
	}
	slices.Sort(got[1:]) // a and c queued in whatever order their goroutines ran
	if fmt.Sprint(got) != "[first a c]" {
		t.Fatalf("store holds %v, want [first a c]", got)
	}
}

// TestBatcherExpect: a queued record waits for records announced by Expect
// (they share its transaction), never longer than maxWait, and not at all
// once every announcement is withdrawn or when nothing was announced.
// newWaitingBatcher is a Batcher over a fresh memCommitter, closed when the
// test ends, that waits up to maxWait for announced records.
func newWaitingBatcher(t *testing.T, maxBatch int, maxWait time.Duration) (*memCommitter, *Batcher) {
	t.Helper()
	m := &memCommitter{}
	b := NewBatcher(m, maxBatch)
	t.Cleanup(func() { b.Close() })
	b.maxWait = maxWait
	return m, b
}

// mustCommit commits one record per id through commit (a Batcher's or an
// Expected's Commit) and fails the test on an error.
func mustCommit(t *testing.T, commit func(context.Context, []Record) ([]Record, error), ids ...string) {
	t.Helper()
	recs := make([]Record, len(ids))
	for i, id := range ids {
		recs[i] = rec(id)
	}
	if _, err := commit(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
}

func TestBatcherExpect(t *testing.T) {
	commitAsync := func(b *Batcher, id string) chan error {
		errc := make(chan error, 1)
		go func() {
			_, err := b.Commit(t.Context(), []Record{rec(id)})
			errc <- err
		}()
		return errc
	}
	t.Run("announced record joins the transaction", func(t *testing.T) {
		m, b := newWaitingBatcher(t, 0, time.Hour) // only the announced record ends the wait
		e := b.Expect()
		errc := commitAsync(b, "a")
		testsupport.WaitFor(t, "a queued", 5*time.Second, func() bool { return queued(b) == 1 })
		time.Sleep(20 * time.Millisecond)
		if _, txns := m.snapshot(); txns != 0 {
			t.Fatalf("%d transactions while an announced record was on its way, want 0", txns)
		}
		mustCommit(t, e.Commit, "b")
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		recs, txns := m.snapshot()
		if txns != 1 || len(recs) != 2 {
			t.Fatalf("%d transactions for %d records, want 1 for 2", txns, len(recs))
		}
		e.Done() // after Commit: no effect
		if b.expected != 0 {
			t.Fatalf("expected = %d after Commit and Done, want 0", b.expected)
		}
	})
	t.Run("wait is bounded by maxWait", func(t *testing.T) {
		_, b := newWaitingBatcher(t, 0, 50*time.Millisecond)
		e := b.Expect()
		defer e.Done()
		start := time.Now()
		mustCommit(t, b.Commit, "a")
		if d := time.Since(start); d < b.maxWait || d > 5*time.Second {
			t.Fatalf("committed after %v, want between maxWait (%v) and 5s", d, b.maxWait)
		}
	})
	t.Run("Done ends the wait", func(t *testing.T) {
		_, b := newWaitingBatcher(t, 0, time.Hour)
		e := b.Expect()
		errc := commitAsync(b, "a")
		testsupport.WaitFor(t, "a queued", 5*time.Second, func() bool { return queued(b) == 1 })
		e.Done()
		e.Done() // twice: withdrawn once
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("record still waiting after the announcement was withdrawn")
		}
		if b.expected != 0 {
			t.Fatalf("expected = %d, want 0", b.expected)
		}
	})
	t.Run("full batch does not wait", func(t *testing.T) {
		_, b := newWaitingBatcher(t, 2, time.Hour)
		e := b.Expect()
		defer e.Done()
		mustCommit(t, b.Commit, "a", "b")
	})
	t.Run("nothing announced, no wait", func(t *testing.T) {
		_, b := newWaitingBatcher(t, 0, time.Hour)
		mustCommit(t, b.Commit, "a")
	})
}

// TestBatcherGroupsOnOneCPU: with one CPU, calls that are ready to run queue
// their records before the next transaction starts, rather than each waking
// the loop into a transaction of its own.
func TestBatcherGroupsOnOneCPU(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const callers = 32
	m := &memCommitter{}
	b := NewBatcher(m, 0)
	defer b.Close()
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Commit(t.Context(), []Record{rec(fmt.Sprint(i))}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if _, txns := m.snapshot(); txns > 4 {
		t.Fatalf("%d callers ready at once took %d transactions, want at most 4", callers, txns)
	}
}
