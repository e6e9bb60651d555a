package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/store"
)

// Duties done once per cluster (re-signing the revocation document) run
// under one lease on the store's clock. The holder renews it every
// leaseRenew; when it stops (killed, partitioned, paused), another replica
// takes it leaseTTL after its last renewal, at the next epoch, and every
// write a duty makes is fenced by that epoch (store.PutDocument), so a
// former holder that wakes up cannot overwrite its successor's work.
const (
	dutiesLease = "duties"
	leaseTTL    = 15 * time.Second
	leaseRenew  = 5 * time.Second
	// leaseSpare is the time a held lease must have left for a duty to
	// start under it without renewing first.
	leaseSpare = leaseTTL - leaseRenew
)

// duties tracks this process's hold on the duties lease.
type duties struct {
	store  store.Store
	holder string
	clock  *clock
	log    *slog.Logger

	mu        sync.Mutex
	lease     store.Lease // the lease as last granted to this process, or another's as last seen
	have      bool        // lease is this process's (until lease.Expires)
	other     string      // the holder last seen, when another
	checkedAt time.Time   // when another holder was last seen
	// yieldUntil: this process gave the lease up because it cannot do the
	// duties (it cannot open the signing key); it does not take the lease
	// again before then, so a replica that can takes it.
	yieldUntil time.Time
	failures   int // duty rounds in a row that failed under the lease

	// instance names this process apart from its replica name: the
	// holder of the replica name's lease (claimReplica).
	instance string
	claimed  bool        // the replica name's lease is this process's to renew
	name     store.Lease // the replica name's lease as last granted
	lostName bool        // another process took the replica name (logged once)
}

func newDuties(st store.Store, holder string, c *clock, log *slog.Logger) *duties {
	return &duties{store: st, holder: holder, clock: c, log: log, instance: defaultHolder()}
}

// replicaLeasePrefix names the lease that keeps a configured replica name
// to one live process: two processes under one name would both believe
// they hold the duties lease (it is held by name).
const replicaLeasePrefix = "replica/"

// ReplicaNameInUseError refuses to start a replica whose configured name a
// live process holds: its lease was renewed while this one waited.
type ReplicaNameInUseError struct {
	Name     string
	Instance string    // the live process: host/pid/random
	Until    time.Time // its lease, on the store's clock
}

func (e *ReplicaNameInUseError) Error() string {
	return fmt.Sprintf("replica name %q is in use by another live cardsignd (instance %s, lease renewed until %s): "+
		"two replicas under one name would both believe they hold the duties lease; give each replica its own "+
		"replica name in the config, or leave replica unset (host/pid/random)",
		e.Name, e.Instance, e.Until.UTC().Format(time.RFC3339))
}

// ClaimReplica makes the configured replica name this process's for as
// long as it runs (RunDuties renews the claim with the duties lease and
// releases it at the end). A name whose previous process stopped without
// releasing it (killed) is taken once its lease lapses, within leaseTTL; a
// name whose holder renews its lease meanwhile is alive, and the start is
// refused with a *ReplicaNameInUseError. With no configured name (host,
// pid and a random suffix) there is nothing to claim.
func (a *Authority) ClaimReplica(ctx context.Context) error {
	if !a.replicaNamed {
		return nil
	}
	d := a.duties
	name := replicaLeasePrefix + d.holder
	w := heldName{name: d.holder, log: a.log}
	for {
		l, err := d.store.AcquireLease(ctx, name, d.instance, leaseTTL)
		if err == nil {
			d.mu.Lock()
			d.claimed, d.name = true, l
			d.mu.Unlock()
			return nil
		}
		if !errors.Is(err, store.ErrLeaseHeld) {
			return fmt.Errorf("claiming replica name %q: %w", d.holder, err)
		}
		if err := w.look(ctx, l); err != nil {
			return err
		}
	}
}

// LeaseReader reads a lease without writing (the store not yet opened):
// the lease, whether there is one, and the store's clock now.
type LeaseReader func(ctx context.Context, name string) (l store.Lease, found bool, now time.Time, err error)

// PrecheckReplica is ClaimReplica's refusal made before the store is
// opened (and so migrated), reading only: it refuses the configured name
// with a *ReplicaNameInUseError when another process's unexpired lease on
// it is renewed while this one watches, and returns nil when there is no
// such lease or it lapses (a killed holder). ClaimReplica after the open
// stays the authoritative claim (two processes starting at once).
func PrecheckReplica(ctx context.Context, replica string, read LeaseReader, log *slog.Logger) error {
	if replica == "" {
		return nil
	}
	w := heldName{name: replica, log: log}
	for {
		l, found, now, err := read(ctx, replicaLeasePrefix+replica)
		if err != nil {
			return fmt.Errorf("reading replica name %q's lease: %w", replica, err)
		}
		if !found || !l.Expires.After(now) {
			return nil
		}
		if err := w.look(ctx, l); err != nil {
			return err
		}
	}
}

// heldName watches another process's unexpired lease on a replica name,
// for ClaimReplica and PrecheckReplica: a holder that renews it while this
// process watches is alive.
type heldName struct {
	name  string
	log   *slog.Logger
	first *store.Lease // the lease at the first look
}

// look is one look at the lease l: the first is logged, a renewal since
// then refuses the name with a *ReplicaNameInUseError; then it waits a
// tenth of the renewal interval for the next look.
func (w *heldName) look(ctx context.Context, l store.Lease) error {
	switch {
	case w.first == nil:
		w.first = &l
		w.log.Info("replica name held by another process; waiting for its lease to lapse (a process that stopped) or be renewed (a live one)",
			"replica", w.name, "instance", l.Holder, "until", l.Expires)
	case l.Holder != w.first.Holder || l.Epoch != w.first.Epoch || l.Expires.After(w.first.Expires):
		return &ReplicaNameInUseError{Name: w.name, Instance: l.Holder, Until: l.Expires}
	}
	t := time.NewTimer(leaseRenew / 10)
	select {
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ReplicaNameLostError: another process took this replica's name while
// its lease had lapsed (the store unreachable for longer than leaseTTL).
// Until this process claims the name again, it runs no cluster duties and
// is not ready: both processes would otherwise believe they hold the
// duties lease, which is held by name.
type ReplicaNameLostError struct {
	Name  string
	Other string // the process holding the name now
}

func (e *ReplicaNameLostError) Error() string {
	return fmt.Sprintf("replica name %q was taken by another process (instance %s) while this one's lease had lapsed: "+
		"two replicas run under one name; this one runs no cluster duties and is not ready until it claims the name again: "+
		"stop one and give each its own replica name", e.Name, e.Other)
}

// renewName renews the replica name's lease, when claimed. When another
// process holds the name, it returns a *ReplicaNameLostError and forgets
// the duties lease (without releasing it: the lease is held by name, so it
// is the other process's too now); acquire refuses to take it again until
// a later renewName claims the name back.
func (d *duties) renewName(ctx context.Context) error {
	d.mu.Lock()
	claimed := d.claimed
	d.mu.Unlock()
	if !claimed {
		return nil
	}
	l, err := d.store.AcquireLease(ctx, replicaLeasePrefix+d.holder, d.instance, leaseTTL)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case errors.Is(err, store.ErrLeaseHeld):
		if !d.lostName {
			d.log.Error("another process took this replica's name while its lease had lapsed: two replicas run under one name; "+
				"this one stops its cluster duties and is not ready until it claims the name again; stop one and give each its own replica name",
				"replica", d.holder, "instance", d.instance, "other", l.Holder)
		}
		d.lostName, d.have, d.other = true, false, l.Holder
		return &ReplicaNameLostError{Name: d.holder, Other: l.Holder}
	case err != nil:
		return fmt.Errorf("replica name lease: %w", err)
	}
	if d.lostName {
		d.log.Info("this replica claimed its name again; cluster duties resume", "replica", d.holder, "instance", d.instance)
	}
	d.name, d.lostName = l, false
	return nil
}

// releaseName gives the replica name up, so a restart under it takes it at
// once.
func (d *duties) releaseName(ctx context.Context) {
	d.mu.Lock()
	l, claimed := d.name, d.claimed
	d.claimed = false
	d.mu.Unlock()
	if claimed {
		_ = d.store.ReleaseLease(ctx, l) // it lapses in leaseTTL otherwise
	}
}

// defaultHolder names this process among the replicas: host, pid and a
// random suffix, so a restarted process is a new holder.
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "cardsignd"
	}
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.Text())
}

// held returns the lease when this process holds it with time to spare,
// renewing or taking it first when needed. ok is false when another replica
// holds it; lease is then that replica's.
func (d *duties) held(ctx context.Context) (lease store.Lease, ok bool, err error) {
	d.mu.Lock()
	l, have := d.lease, d.have
	d.mu.Unlock()
	if have && d.clock.now().Add(leaseSpare).Before(l.Expires) {
		return l, true, nil
	}
	// Another replica held it a moment ago: do not ask the database again
	// at every fetch (each ask is a write to the lease row).
	d.mu.Lock()
	recent := !have && d.other != "" && time.Since(d.checkedAt) < time.Second
	d.mu.Unlock()
	if recent {
		return l, false, nil
	}
	return d.acquire(ctx)
}

// acquire takes or renews the lease now.
func (d *duties) acquire(ctx context.Context) (store.Lease, bool, error) {
	d.mu.Lock()
	yielding := time.Now().Before(d.yieldUntil)
	lost := d.lostName
	d.mu.Unlock()
	if yielding || lost {
		// lost: another process holds this replica's name (renewName),
		// and with it the duties lease, held by name.
		return store.Lease{}, false, nil
	}
	l, err := d.store.AcquireLease(ctx, dutiesLease, d.holder, leaseTTL)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case errors.Is(err, store.ErrLeaseHeld):
		if d.have || d.other != l.Holder {
			d.log.Info("another replica holds the duties lease", "holder", l.Holder, "epoch", l.Epoch, "expires", l.Expires)
		}
		d.lease, d.have, d.other, d.checkedAt = l, false, l.Holder, time.Now()
		return l, false, nil
	case err != nil:
		// Unknown: the lease may have lapsed. Duties wait for the next
		// renewal; the fence refuses a write made under a lapsed lease.
		return store.Lease{}, false, err
	}
	if !d.have || d.lease.Epoch != l.Epoch {
		d.log.Info("this replica holds the duties lease", "holder", d.holder, "epoch", l.Epoch)
	}
	d.lease, d.have, d.other = l, true, ""
	return l, true, nil
}

// holding reports whether this process holds the lease, as far as it knows.
func (d *duties) holding() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.have
}

// current returns the lease when this process holds it unexpired, as far
// as it knows (the store's fence check is the authority).
func (d *duties) current() (store.Lease, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lease, d.have && d.clock.now().Before(d.lease.Expires)
}

// release gives the lease up, so another replica takes over at once rather
// than after leaseTTL.
func (d *duties) release(ctx context.Context) {
	d.mu.Lock()
	l, have := d.lease, d.have
	d.have = false
	d.mu.Unlock()
	if !have {
		return
	}
	if err := d.store.ReleaseLease(ctx, l); err != nil {
		d.log.Warn("could not release the duties lease; another replica takes it when it expires", "err", err, "expires", l.Expires)
	}
}

// RunDuties runs until ctx is done: it keeps the store clock's offset
// measured, holds (or waits for) the duties lease, re-signs the revocation
// document when this process holds the lease and the document is due, and
// follows changes other replicas announce (store.Watcher), so that a key
// revoked on another replica stops signing and publishing here at once
// rather than at the next periodic re-read.
func (a *Authority) RunDuties(ctx context.Context) {
	if w, ok := a.store.(store.Watcher); ok {
		go func() {
			if err := w.Watch(ctx, a.changed); err != nil && ctx.Err() == nil {
				a.log.Error("store change notifications stopped; changes by other replicas are seen at the periodic re-read", "err", err)
			}
		}()
	}
	tick := time.NewTicker(leaseRenew)
	defer tick.Stop()
	var lastErr string
	for {
		err := a.dutyRound(ctx)
		a.readiness.failed(err)
		switch {
		case err != nil && err.Error() != lastErr && ctx.Err() == nil:
			a.log.Warn("cluster duties: round failed; retrying", "err", err, "every", leaseRenew)
		case err == nil && lastErr != "":
			a.log.Info("cluster duties: recovered")
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
		}
		select {
		case <-ctx.Done():
			// A short, fresh context: ctx is done, and the release is worth
			// a try so another replica takes over at once.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if a.witnesses != nil {
				a.witnesses.halt() // before the lease goes: nothing asks the witnesses after
			}
			if a.events != nil {
				a.events.halt() // nothing moves a cursor after the lease goes
			}
			a.duties.release(rctx)
			a.metrics.dutiesLeaseHeld(false)
			a.duties.releaseName(rctx)
			cancel()
			return
		case <-tick.C:
		case <-a.poke:
		}
	}
}

// dutyRound syncs the clock, renews or takes the lease, and, as its holder,
// brings the revocation document up to date.
func (a *Authority) dutyRound(ctx context.Context) error {
	// Whether the lease is held once the round ends: false too when the
	// round failed before the lease, or gave it up (failed).
	defer func() {
		held := a.duties.holding()
		a.metrics.dutiesLeaseHeld(held)
		if a.witnesses != nil {
			// Stopped whenever this replica may no longer hold the lease
			// (a round that failed before renewing it too), so that two
			// replicas do not ask the witnesses at once for long.
			a.witnesses.lead(ctx, held)
		}
		if a.events != nil {
			a.events.lead(ctx, held)
		}
	}()
	if err := a.clock.sync(ctx); err != nil {
		return fmt.Errorf("store clock: %w", err)
	}
	err := a.duties.renewName(ctx)
	var lost *ReplicaNameLostError
	switch {
	case errors.As(err, &lost):
		a.readiness.nameLost(lost)
		return err
	case err != nil:
		return err
	}
	a.readiness.nameLost(nil)
	_, leader, err := a.duties.acquire(ctx)
	if err != nil {
		return fmt.Errorf("duties lease: %w", err)
	}

	if !leader {
		// Read the stored revocation document now and then, though no
		// verifier asked this replica for it yet: it is what this replica
		// serves if the store goes away.
		if err := a.revocations.Reread(ctx); err != nil {
			return fmt.Errorf("revocation document: %w", err)
		}
		return a.catalog.publish(ctx)
	}
	if _, err := a.revocations.Document(ctx); err != nil {
		if a.duties.failed(ctx, err) {
			return fmt.Errorf("revocation document: %w; gave the duties lease up for %s so that a replica that can sign takes it", err, yieldFor)
		}
		return fmt.Errorf("revocation document: %w", err)
	}
	a.duties.succeeded()
	// The registry's re-signing failing does not give the lease up: the
	// key signs (the revocation document just did), a card does not. The
	// catalog follows the cards re-signed, and is published whatever
	// happened to the others.
	err = a.registry.Resign(ctx)
	if errors.Is(err, registry.ErrResignUnfinished) {
		// A long pass (a large registry at a KMS's quota) goes on in
		// the next round, at once: this one ends so that the leases are
		// renewed and the revocation document kept fresh meanwhile.
		a.pokeDuties()
		err = nil
	}
	return errors.Join(err, a.catalog.publish(ctx))
}

// yieldAfter duty rounds in a row that cannot sign (the key cannot be
// opened here), the holder gives the lease up for yieldFor: holding it
// would keep every replica's revocation document from following key
// changes, and its expiry from being renewed by one that can sign.
const (
	yieldAfter = 3
	yieldFor   = 3 * leaseTTL
)

// failed counts a duty round that failed under the lease, and gives the
// lease up when the cause is this process's (it cannot open the signing
// key) and it persisted for yieldAfter rounds. It reports whether it did.
func (d *duties) failed(ctx context.Context, err error) bool {
	if !errors.As(err, new(*KeyUnavailableError)) {
		return false // the store, or anything every replica would hit alike
	}
	d.mu.Lock()
	d.failures++
	yield := d.failures >= yieldAfter
	if yield {
		d.failures = 0
	}
	d.mu.Unlock()
	if !yield {
		return false
	}
	d.release(ctx)
	d.mu.Lock()
	d.yieldUntil = time.Now().Add(yieldFor)
	d.mu.Unlock()
	d.log.Warn("this replica cannot sign the revocation document; giving the duties lease to another replica", "err", err, "for", yieldFor)
	return true
}

func (d *duties) succeeded() {
	d.mu.Lock()
	d.failures = 0
	d.mu.Unlock()
}

// changed follows a change another process committed to the store.
func (a *Authority) changed(topic string) {
	switch topic {
	case store.TopicDocuments:
		a.revocations.Forget()
		a.catalog.stored()
		return
	default: // keys, or "" after a reconnect: anything may have changed
		a.keys.invalidate()
		a.revocations.Forget()
		a.catalog.changed()
		a.readiness.request()
	}
	a.pokeDuties()
}

// pokeDuties asks RunDuties for a round now: a key changed, and the
// revocation document may be due.
func (a *Authority) pokeDuties() {
	select {
	case a.poke <- struct{}{}:
	default:
	}
}
