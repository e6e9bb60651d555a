package witness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cardsign/cardsign/transparency"
)

// Defaults of Options.
const (
	DefaultRequestTimeout = 5 * time.Second
	DefaultPollInterval   = 100 * time.Millisecond
)

// Backoff after a failed request: doubling from minBackoff up to
// maxBackoff, each wait jittered down by up to half so that the witnesses
// of many logs do not retry in step.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// pruneEvery spaces the deletes of superseded cosignatures: pruning is a
// DELETE on the shared store, and a busy log gains a quorum size every
// round.
const pruneEvery = 10 * time.Second

// maxCatchUp bounds the 409 answers a single ask follows: a witness that
// moves under us (another log instance talking to it) gets asked again on
// the next round instead of in a loop.
const maxCatchUp = 4

// Collector keeps the witnesses cosigning the log's newest checkpoint and
// stores their cosignatures. Only the replica holding the duties lease runs
// it; every replica reads what it stores.
type Collector struct {
	log    Log
	store  Store
	policy transparency.WitnessPolicy
	opts   Options
	ws     []*chaser
	wake   chan struct{}

	mu        sync.Mutex
	loaded    bool                      // the witnesses' sizes were read from the store
	cosigned  map[int64]map[string]bool // size → the witnesses whose cosignatures of it were stored, above pruned
	pruned    int64                     // cosignatures below it were pruned
	lastPrune time.Time
}

// NewCollector returns a collector asking the witnesses ws to cosign l's
// checkpoints, storing their cosignatures in st. Every endpoint must be a
// witness of p (p's quorum decides which cosignatures are superseded and
// pruned), and p's quorum must be reachable with ws.
func NewCollector(l Log, st Store, ws []Endpoint, p transparency.WitnessPolicy, o Options) (*Collector, error) {
	if l == nil || st == nil {
		return nil, errors.New("witness: a collector needs a log and a store")
	}
	if len(ws) == 0 {
		return nil, errors.New("witness: a collector needs at least one witness")
	}
	if p.Quorum < 1 || p.Quorum > len(ws) {
		return nil, fmt.Errorf("witness: the quorum %d is outside 1..%d, the number of witnesses asked", p.Quorum, len(ws))
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	c := &Collector{log: l, store: st, policy: p, opts: o, wake: make(chan struct{}, 1), cosigned: map[int64]map[string]bool{}}
	seen := map[string]bool{}
	for i, ep := range ws {
		ch, err := newChaser(ep, o)
		if err != nil {
			return nil, fmt.Errorf("witness %d: %w", i+1, err)
		}
		if seen[ch.ep.Name] {
			return nil, fmt.Errorf("witness %d: %q is listed twice", i+1, ch.ep.Name)
		}
		seen[ch.ep.Name] = true
		if !inPolicy(p, ch.ep.Witness) {
			return nil, fmt.Errorf("witness %d: %q (key %q) is not a witness of the policy", i+1, ch.ep.Name, ch.ep.Key)
		}
		c.ws = append(c.ws, ch)
	}
	return c, nil
}

func inPolicy(p transparency.WitnessPolicy, w transparency.Witness) bool {
	for _, pw := range p.Witnesses {
		if pw.Name == w.Name && pw.Key == w.Key {
			return true
		}
	}
	return false
}

// Wake tells the collector the log grew here; it never blocks.
func (c *Collector) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Round asks every witness once, in parallel, to cosign the log's newest
// checkpoint (a witness already at that size is not asked), and returns
// what failed, joined. Run does the same continuously.
func (c *Collector) Round(ctx context.Context) error {
	if err := c.load(ctx); err != nil {
		return err
	}
	size, err := c.log.Size(ctx)
	if err != nil {
		return fmt.Errorf("witness: reading the log's size: %w", err)
	}
	errs := make([]error, len(c.ws))
	var wg sync.WaitGroup
	for i, w := range c.ws {
		wg.Go(func() { errs[i] = c.advance(ctx, w, size) })
	}
	wg.Wait()
	c.prune(ctx, true)
	return errors.Join(errs...)
}

// Run keeps every witness at the log's newest size until ctx ends: it
// reads the size on Wake and every PollInterval (other replicas commit
// too), and chases each witness on its own goroutine, so that a slow or
// failing witness never holds the others back. It returns ctx's error.
func (c *Collector) Run(ctx context.Context) error {
	// A new run (this replica leads again) reads the witnesses' sizes
	// again: another replica asked them meanwhile.
	c.mu.Lock()
	c.loaded = false
	c.mu.Unlock()
	for {
		err := c.load(ctx)
		if err == nil {
			break
		}
		c.opts.Logger.WarnContext(ctx, "witness: reading the witnesses' sizes", "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(minBackoff):
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, w := range c.ws {
		wg.Go(func() { c.chase(ctx, w) })
	}
	t := time.NewTicker(c.opts.PollInterval)
	defer t.Stop()
	for {
		if size, err := c.log.Size(ctx); err != nil {
			if ctx.Err() == nil {
				c.opts.Logger.WarnContext(ctx, "witness: reading the log's size", "error", err)
			}
		} else {
			for _, w := range c.ws {
				w.raise(size)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.wake:
		case <-t.C:
		}
	}
}

// chase sends w the newest size it was given until ctx ends, backing off
// after failures.
func (c *Collector) chase(ctx context.Context, w *chaser) {
	backoff := time.Duration(0)
	for {
		size := w.want()
		if size > w.cosignedSize() {
			if err := c.advance(ctx, w, size); err != nil && ctx.Err() == nil {
				backoff = min(max(2*backoff, minBackoff), maxBackoff)
				wait := backoff/2 + rand.N(backoff/2+1)
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				continue
			}
			backoff = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
	}
}

// load reads each witness's last cosigned size from the store, once.
func (c *Collector) load(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded {
		return nil
	}
	sizes, err := c.store.WitnessSizes(ctx)
	if err != nil {
		return fmt.Errorf("witness: reading the witnesses' sizes: %w", err)
	}
	for _, w := range c.ws {
		if n, ok := sizes[w.ep.Name]; ok {
			w.mu.Lock()
			w.known, w.st.Size = n, n
			w.mu.Unlock()
			c.addCosigned(n, w.ep.Name)
		}
	}
	c.loaded = true
	return nil
}

// Status returns each witness's state, in the order given to NewCollector.
func (c *Collector) Status() []WitnessStatus {
	out := make([]WitnessStatus, len(c.ws))
	for i, w := range c.ws {
		out[i] = w.status()
	}
	return out
}

// stored records that w's cosignature of size was stored, and tells the
// observer.
func (c *Collector) stored(ctx context.Context, w string, size int64) {
	c.mu.Lock()
	if size >= c.pruned {
		c.addCosigned(size, w)
	}
	c.mu.Unlock()
	c.opts.Observer.Stored(size)
	c.prune(ctx, false)
}

// addCosigned notes w's stored cosignature of size; c.mu is held.
func (c *Collector) addCosigned(size int64, w string) {
	if c.cosigned[size] == nil {
		c.cosigned[size] = map[string]bool{}
	}
	c.cosigned[size][w] = true
}

// prune deletes the cosignatures below the newest size with the quorum:
// nobody serves them any more. Unless forced it waits pruneEvery between
// deletes.
func (c *Collector) prune(ctx context.Context, force bool) {
	c.mu.Lock()
	q := int64(-1)
	for size, ws := range c.cosigned {
		if len(ws) >= c.policy.Quorum && size > q {
			q = size
		}
	}
	if q <= c.pruned || (!force && time.Since(c.lastPrune) < pruneEvery) {
		c.mu.Unlock()
		return
	}
	c.lastPrune = time.Now()
	c.mu.Unlock()
	if err := c.store.PruneCosignatures(ctx, q); err != nil {
		c.opts.Logger.WarnContext(ctx, "witness: pruning superseded cosignatures", "below", q, "error", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pruned = max(c.pruned, q)
	for size := range c.cosigned {
		if size < c.pruned {
			delete(c.cosigned, size)
		}
	}
}

type nopObserver struct{}

func (nopObserver) Answered(string, int64, time.Duration, error) {}
func (nopObserver) Conflict(*ConflictError)                      {}
func (nopObserver) Stored(int64)                                 {}
