package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
)

// Store is what delivery reads and writes: the audit log and the cursors.
type Store interface {
	ListAudit(ctx context.Context, afterSeq int64, limit int) ([]audit.Record, error)
	AuditHead(ctx context.Context) (seq int64, hash []byte, err error)
	store.EventCursors
}

// Where a sink without a cursor starts.
const (
	FromStart = "start" // every record in the audit log
	FromNow   = "now"   // records appended after the sink's first delivery round
)

// SinkConfig is one sink and what it takes.
type SinkConfig struct {
	// Name names the sink's cursor in the store and its metrics: renaming
	// a sink starts it afresh (from From).
	Name   string
	Filter Filter
	From   string // FromStart (the default) or FromNow
	Sink   Sink
}

// Options tune delivery.
type Options struct {
	// Batch is how many records are read, and at most delivered, at once
	// (100 when 0).
	Batch int
	// Poll is how often a sink that is caught up looks for records another
	// replica appended (1s when 0); Wake looks at once.
	Poll time.Duration
	// Linger is how long a sink that caught up waits, once woken, for
	// more records before it reads (50ms when 0): under load, batches grow
	// and the audit log is read, and the cursor written, a few times a
	// second rather than once per commit, which the signing path's writes
	// would wait for.
	Linger time.Duration
	// MinBackoff and MaxBackoff bound the wait after a failed delivery,
	// doubled after each failure in a row, with full jitter (500ms and 1m
	// when 0).
	MinBackoff, MaxBackoff time.Duration
	Log                    *slog.Logger
	// Checkpoint, when set, signs the transparency log's checkpoint of a
	// tree size (transparency.Checkpointer.CheckpointAt): a sink whose
	// filter takes log checkpoint events gets one of the tree up to its
	// cursor once it has caught up, at most every CheckpointEvery (10s
	// when 0), sent on its own after the records it covers and retried
	// until it is taken. It never holds records back.
	Checkpoint      func(ctx context.Context, size int64) ([]byte, error)
	CheckpointEvery time.Duration
}

// Fence returns the duties lease as this process holds it, and false when
// it does not: cursors move only under it.
type Fence func() (store.Lease, bool)

// Deliverer delivers the audit log's records as events to every sink. Run
// it on the replica that holds the duties lease (Run returns when the
// lease is lost).
type Deliverer struct {
	st    Store
	b     Builder
	sinks []*sinkRun
	opt   Options
	wake  chan struct{}
}

// NewDeliverer makes a deliverer of b's events to sinks.
func NewDeliverer(st Store, b Builder, sinks []SinkConfig, opt Options) (*Deliverer, error) {
	if opt.Batch <= 0 {
		opt.Batch = 100
	}
	if opt.Poll <= 0 {
		opt.Poll = time.Second
	}
	if opt.MinBackoff <= 0 {
		opt.MinBackoff = 500 * time.Millisecond
	}
	if opt.Linger <= 0 {
		opt.Linger = 50 * time.Millisecond
	}
	if opt.CheckpointEvery <= 0 {
		opt.CheckpointEvery = 10 * time.Second
	}
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = time.Minute
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	d := &Deliverer{st: st, b: b, opt: opt, wake: make(chan struct{}, 1)}
	seen := map[string]bool{}
	for _, s := range sinks {
		if s.Name == "" || seen[s.Name] {
			return nil, fmt.Errorf("events: sink name %q is empty or used twice", s.Name)
		}
		seen[s.Name] = true
		if s.From == "" {
			s.From = FromStart
		}
		if s.From != FromStart && s.From != FromNow {
			return nil, fmt.Errorf("events: sink %q: from %q is not start or now", s.Name, s.From)
		}
		d.sinks = append(d.sinks, &sinkRun{cfg: s, wake: make(chan struct{}, 1)})
	}
	return d, nil
}

// Wake tells every sink that records were appended.
func (d *Deliverer) Wake() {
	for _, s := range d.sinks {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Close closes every sink.
func (d *Deliverer) Close() error {
	var errs []error
	for _, s := range d.sinks {
		errs = append(errs, s.cfg.Sink.Close())
	}
	return errors.Join(errs...)
}

// Run delivers to every sink until ctx is done or the lease is lost (a
// cursor move refused as fenced out, or the lease taken anew under
// another epoch: another replica may have delivered meanwhile, so a new
// Run starts from the stored cursors), and returns why.
func (d *Deliverer) Run(ctx context.Context, fence Fence) error {
	l, ok := fence()
	if !ok {
		return ErrNotLeader
	}
	epoch, held := l.Epoch, fence
	fence = func() (store.Lease, bool) {
		l, ok := held()
		return l, ok && l.Epoch == epoch
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, s := range d.sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.run(ctx, s, fence); err != nil && ctx.Err() == nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

// ErrNotLeader: the process no longer holds the duties lease.
var ErrNotLeader = errors.New("events: this replica no longer holds the duties lease")

// run is one sink's delivery loop.
func (d *Deliverer) run(ctx context.Context, s *sinkRun, fence Fence) error {
	log := d.opt.Log.With("sink", s.cfg.Name)
	cursor, err := d.startRetrying(ctx, s, fence, log)
	if err != nil {
		return err
	}
	failures, lastErr := 0, ""
	for ctx.Err() == nil {
		n, err := d.round(ctx, s, &cursor, fence)
		switch {
		case errors.Is(err, store.ErrLeaseLost) || errors.Is(err, ErrNotLeader):
			return err
		case errors.Is(err, store.ErrStaleCursor):
			// Another deliverer moved the cursor further: go on from there.
			log.Warn("events: the sink's cursor moved further elsewhere; going on from the stored one", "cursor", cursor, "err", err)
			if cursor, err = d.startRetrying(ctx, s, fence, log); err != nil {
				return err
			}
		case err != nil:
			failures++
			s.failed(err)
			wait := backoff(d.opt.MinBackoff, d.opt.MaxBackoff, failures)
			var ra *RetryAfterError
			if errors.As(err, &ra) {
				wait = min(max(ra.After, wait), d.opt.MaxBackoff)
			}
			// Logged when the failure is new or changes, and every tenth
			// time it persists: a receiver down for hours is not a log
			// line a second.
			if msg := err.Error(); msg != lastErr || failures%10 == 0 {
				lastErr = msg
				log.Warn("events: delivery failed; retrying from the cursor", "err", err, "cursor", cursor, "failures", failures, "retry_in", wait.Round(time.Millisecond))
			}
			if !s.sleep(ctx, wait) {
				return ctx.Err()
			}
		default:
			if failures > 0 {
				log.Info("events: delivery recovered", "cursor", cursor, "after_failures", failures)
			}
			failures, lastErr = 0, ""
			if n < d.opt.Batch {
				// Caught up: the log's checkpoint of what it took, then wait.
				d.checkpoint(ctx, s, cursor, log)
				if !(s.sleep(ctx, d.opt.Poll) && sleep(ctx, d.opt.Linger)) {
					return ctx.Err()
				}
			}
		}
	}
	return ctx.Err()
}

// startRetrying is start, retried with a pause while the store cannot be
// read; it gives up only when the lease is lost or ctx is done.
func (d *Deliverer) startRetrying(ctx context.Context, s *sinkRun, fence Fence, log *slog.Logger) (int64, error) {
	for {
		cursor, err := d.start(ctx, s, fence)
		switch {
		case err == nil:
			return cursor, nil
		case errors.Is(err, store.ErrLeaseLost) || errors.Is(err, ErrNotLeader):
			return 0, err
		}
		log.Warn("events: cannot read the sink's cursor; retrying", "err", err)
		if !s.sleep(ctx, d.opt.MinBackoff*4) {
			return 0, ctx.Err()
		}
	}
}

// checkpoint sends the sink the log's checkpoint of the tree up to cursor,
// when its filter takes them, it has taken records since the last one, and
// the last is CheckpointEvery old. A checkpoint that fails is tried again
// at the next look; it never holds records back, and the cursor does not
// wait for it.
func (d *Deliverer) checkpoint(ctx context.Context, s *sinkRun, cursor int64, log *slog.Logger) {
	if d.opt.Checkpoint == nil || !s.cfg.Filter.Match(TypeLogCheckpoint) || cursor == 0 {
		return
	}
	if s.cpSize >= cursor || time.Since(s.cpAt) < d.opt.CheckpointEvery {
		return
	}
	note, err := d.opt.Checkpoint(ctx, cursor)
	if err == nil {
		_, err = s.cfg.Sink.Send(ctx, []Message{d.b.CheckpointMessage(cursor, note, time.Now())})
	}
	switch {
	case err == nil:
		s.cpSize, s.cpAt, s.cpErr = cursor, time.Now(), ""
	case ctx.Err() != nil:
	case err.Error() != s.cpErr:
		s.cpErr = err.Error()
		log.Warn("events: the log checkpoint was not delivered; it is tried again (the records are not held back)", "size", cursor, "err", err)
	}
}

// start reads the sink's cursor; a sink without one starts at the
// beginning, or (FromNow) at the head, recorded at once so that a restart
// does not move it.
func (d *Deliverer) start(ctx context.Context, s *sinkRun, fence Fence) (int64, error) {
	c, err := d.st.EventCursor(ctx, s.cfg.Name)
	if err == nil {
		s.moved(c.Seq, c.UpdatedAt)
		return c.Seq, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	var at int64
	if s.cfg.From == FromNow {
		if at, _, err = d.st.AuditHead(ctx); err != nil {
			return 0, err
		}
	}
	if err := d.advance(ctx, s, fence, at); err != nil {
		return 0, err
	}
	return at, nil
}

// round delivers the next batch after cursor and moves the cursor past
// what was delivered. It returns how many records it took.
func (d *Deliverer) round(ctx context.Context, s *sinkRun, cursor *int64, fence Fence) (int, error) {
	recs, err := d.st.ListAudit(ctx, *cursor, d.opt.Batch)
	if err != nil {
		return 0, fmt.Errorf("reading the audit log after %d: %w", *cursor, err)
	}
	if len(recs) == 0 {
		s.pending(time.Time{})
		return 0, nil
	}
	s.pending(recs[0].Time)
	if recs[0].Seq <= *cursor {
		return 0, fmt.Errorf("the audit log returned record %d after %d", recs[0].Seq, *cursor)
	}
	var msgs []Message
	for _, r := range recs {
		if t := d.b.TypeOf(r); s.cfg.Filter.Match(t) {
			msgs = append(msgs, d.b.Message(r))
		}
	}
	last := recs[len(recs)-1].Seq
	var sent int
	if len(msgs) > 0 {
		sent, err = s.cfg.Sink.Send(ctx, msgs)
	}
	if sent < 0 || sent > len(msgs) || (err == nil && sent != len(msgs)) {
		return 0, fmt.Errorf("sink %q reported %d of %d events delivered (err %v): nothing is counted as delivered", s.cfg.Name, sent, len(msgs), err)
	}
	s.delivered(sent)
	if err != nil {
		if sent > 0 {
			// Keep what was delivered: the cursor moves to the last of it,
			// so a retry sends only the rest.
			if aerr := d.advance(ctx, s, fence, msgs[sent-1].Seq); aerr != nil {
				return 0, errors.Join(err, aerr)
			}
			*cursor = msgs[sent-1].Seq
		}
		return 0, err
	}
	if err := d.advance(ctx, s, fence, last); err != nil {
		return 0, err
	}
	*cursor = last
	return len(recs), nil
}

// advance moves the sink's cursor to seq under the lease.
func (d *Deliverer) advance(ctx context.Context, s *sinkRun, fence Fence, seq int64) error {
	l, ok := fence()
	if !ok {
		return ErrNotLeader
	}
	if err := d.st.AdvanceEventCursor(ctx, l, s.cfg.Name, seq); err != nil {
		return fmt.Errorf("moving the cursor to %d: %w", seq, err)
	}
	s.moved(seq, time.Now())
	return nil
}

// backoff is the wait after the n-th failure in a row: full jitter over
// lo·2^(n-1), capped at hi.
func backoff(lo, hi time.Duration, n int) time.Duration {
	ceil := hi
	if n < 30 {
		ceil = min(lo<<(n-1), hi)
	}
	return lo/2 + rand.N(max(ceil-lo/2, 1))
}

// sleep waits d, or until ctx is done (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
