package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/store"
)

// readyState is the outcome of the last readiness check.
type readyState struct {
	err error
	at  time.Time
	// failure: set by failed (a store call failed outside the check),
	// which a check that started before it does not undo.
	failure bool
}

// errStale: the periodic check stopped reporting (it hangs or was stopped).
var errStale = errors.New("readiness check is overdue")

// canaryInput is what readiness checks sign. It is not a JWS signing input
// (no '.', not base64url), so a canary signature can never pass for the
// signature of a card, and it is never returned to anyone anyway.
const canaryInput = "cardsign readiness canary: not a card"

// readiness probes whether the authority can sign: a canary run now and
// then, whose last outcome /readyz and the gRPC health service report, so a
// flood of probes never reaches an HSM or a KMS quota.
type readiness struct {
	store   store.Store
	keys    *keyring
	now     func() time.Time // the clock key states are derived at
	metrics *Metrics
	log     *slog.Logger

	draining atomic.Bool   // set at shutdown: /readyz says no while calls finish
	drained  chan struct{} // closed at shutdown: long streams end
	drainOne sync.Once
	last     atomic.Pointer[readyState]  // the last check
	every    atomic.Int64                // watch period plus timeout, for staleness
	recheck  chan struct{}               // asks watch for a check now
	notify   atomic.Pointer[func(error)] // watch's notify, for failed
	// lost: another process holds this replica's name (nameLost); not
	// ready until it is claimed again.
	lost atomic.Pointer[ReplicaNameLostError]
}

// storeRecheck is how soon readiness is checked again while the store is
// unreachable, whatever the interval: a replica is back in client health
// checks within about this long of the database, not an interval later.
const storeRecheck = 500 * time.Millisecond

func newReadiness(st store.Store, keys *keyring, now func() time.Time, m *Metrics, log *slog.Logger) *readiness {
	return &readiness{store: st, keys: keys, now: now, metrics: m, log: log, recheck: make(chan struct{}, 1), drained: make(chan struct{})}
}

// check runs one readiness check now and records its outcome: the store
// answers (key records and the audit head) and takes a durable write, a key
// is active, and every key due to sign makes a signature that verifies
// against its published key.
func (r *readiness) check(ctx context.Context) error {
	start := time.Now()
	err := r.canary(ctx)
	for {
		cur := r.last.Load()
		if err == nil && cur != nil && cur.failure && cur.at.After(start) {
			// A store call failed while this check ran: its success may
			// predate the failure. Check again rather than say ready.
			r.request()
			return cur.err
		}
		if r.last.CompareAndSwap(cur, &readyState{err: err, at: time.Now()}) {
			break
		}
	}
	if err != nil {
		r.metrics.canaryRuns.WithLabelValues("failed").Inc()
		r.metrics.ready.Set(0)
	} else {
		r.metrics.canaryRuns.WithLabelValues("ok").Inc()
		if r.lost.Load() == nil { // another process holds this replica's name: not ready
			r.metrics.ready.Set(1)
		}
	}
	return err
}

func (r *readiness) canary(ctx context.Context) error {
	if _, err := r.keys.records(ctx, true); err != nil {
		return err
	}
	if _, _, err := r.store.AuditHead(ctx); err != nil {
		return &UnavailableError{What: "audit log", Err: err}
	}
	// A store that reads but cannot write (a full disk, a read-only
	// mount) would fail every audit commit: prove a durable write.
	if _, err := r.store.NextSequence(ctx, "readiness-canary"); err != nil {
		return &UnavailableError{What: "audit log", Err: fmt.Errorf("write: %w", err)}
	}
	keys, err := r.keys.signing(ctx, r.now())
	if err != nil {
		return err
	}
	for _, k := range keys {
		// jose.Sign verifies the signature with the signer's public key;
		// the keyring tied that key to the published one.
		if pub, ok := k.Signer.Public().(publicKey); !ok || !pub.Equal(k.Public) {
			return &KeyChangedError{KID: k.KID}
		}
		// The canary goes around the backend's concurrency limit: under
		// load every slot is taken by real signatures, and a busy backend
		// is not an unready one.
		s := k.Signer
		if ls, ok := s.(*limitedSigner); ok {
			s = ls.inner
		}
		// An opened key signs from memory (a file key) or through a
		// session; its backend may know that a restart would not find it
		// again (the key file deleted or replaced). Signing goes on, but
		// readiness says so now rather than at the next restart.
		if hc, ok := s.(keyHealthChecker); ok {
			if err := hc.Healthy(ctx); err != nil {
				return &UnavailableError{What: "signing key " + k.KID, Err: fmt.Errorf("%w: %w", backends.ErrUnavailable, err)}
			}
		}
		if _, err := jose.Sign(ctx, s, k.Alg, []byte(canaryInput)); err != nil {
			return &UnavailableError{What: "signing key " + k.KID, Err: fmt.Errorf("%w: canary signature: %w", backends.ErrUnavailable, err)}
		}
	}
	for _, scheme := range r.keys.backends.Schemes() {
		b, err := r.keys.backends.Backend(ctx, scheme)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", backends.ErrUnavailable, scheme, err)
		}
		if hc, ok := b.(backends.HealthChecker); ok {
			if err := hc.Healthy(ctx); err != nil {
				return fmt.Errorf("%w: %s: %v", backends.ErrUnavailable, scheme, err)
			}
		}
	}
	return nil
}

// failed marks the authority not ready at once when err says the store is
// unreachable or full (a signature's audit commit, a key read, a document read
// failed): health checks and /readyz stop sending calls here without
// waiting for the next check, which is asked for now and repeated every
// storeRecheck until the store answers. Other errors leave readiness to
// the check.
func (r *readiness) failed(err error) {
	if err == nil || !storeDown(err) {
		return
	}
	for {
		cur := r.last.Load()
		if cur != nil && cur.err != nil {
			break // already not ready: the check follows the store
		}
		if r.last.CompareAndSwap(cur, &readyState{err: &UnavailableError{What: "store", Err: err}, at: time.Now(), failure: true}) {
			r.metrics.ready.Set(0)
			r.log.Warn("not ready: a store call failed; checking again until the store answers", "err", err, "every", storeRecheck)
			if n := r.notify.Load(); n != nil {
				(*n)(r.ready())
			}
			break
		}
	}
	r.request()
}

// nameLost records whether another process holds this replica's name
// (nil: this process holds it): while it does, the authority is not ready,
// whatever the checks say. The health service hears of a change at once.
func (r *readiness) nameLost(err *ReplicaNameLostError) {
	if prev := r.lost.Swap(err); (prev == nil) == (err == nil) {
		return
	}
	if err == nil {
		r.request() // the metric follows the next check
	} else {
		r.metrics.ready.Set(0)
	}
	if n := r.notify.Load(); n != nil {
		(*n)(r.ready())
	}
}

// storeDown reports whether err means the store cannot take calls now: it
// is unreachable, or its volume is full.
func storeDown(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrFull)
}

// keyHealthChecker is implemented by the signers of backends that can tell
// whether an opened key is still where it was opened from (the file
// backend's signer stats its key file).
type keyHealthChecker interface {
	Healthy(ctx context.Context) error
}

// watch runs check every interval until ctx is done, each check bounded by
// timeout, and at once when asked (request). A failure is logged when the
// state changes, not on every tick; notify, when set, sees the readiness
// after every check.
func (r *readiness) watch(ctx context.Context, interval, timeout time.Duration, notify func(error)) {
	r.every.Store(int64(interval + timeout))
	if notify != nil {
		r.notify.Store(&notify)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := r.check(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if notify != nil {
			notify(r.ready())
		}
		switch {
		case err != nil && (last == nil || last.Error() != err.Error()):
			r.log.Warn("not ready: readiness check failed", "err", err)
		case err == nil && last != nil:
			r.log.Info("ready again")
		}
		last = err
		var soon <-chan time.Time
		if err != nil && storeDown(err) && storeRecheck < interval {
			soon = time.After(storeRecheck)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.recheck:
		case <-soon:
		}
	}
}

// request asks watch for a check now, without waiting for it: after
// revoking the last active key, /readyz should not say ready for another
// interval. Requests made while one is pending make one check.
func (r *readiness) request() {
	select {
	case r.recheck <- struct{}{}:
	default:
	}
}

// drain marks the authority as shutting down.
func (r *readiness) drain() {
	r.draining.Store(true)
	r.drainOne.Do(func() { close(r.drained) })
}

// ready reports the last check's outcome: nil when the authority can sign.
func (r *readiness) ready() error {
	if r.draining.Load() {
		return ErrDraining
	}
	if lost := r.lost.Load(); lost != nil {
		return lost
	}
	st := r.last.Load()
	if st == nil {
		return ErrNotChecked
	}
	if every := time.Duration(r.every.Load()); every > 0 && time.Since(st.at) > 3*every {
		return errStale
	}
	return st.err
}
