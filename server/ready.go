package server

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// readyState is the outcome of the last readiness check.
type readyState struct {
	err error
	at  time.Time
}

// ErrNotChecked: no readiness check has finished yet.
var ErrNotChecked = errors.New("readiness not checked yet")

// errStale: the periodic check stopped reporting (it hangs or was stopped).
var errStale = errors.New("readiness check is overdue")

// canaryInput is what readiness checks sign. It is not a JWS signing input
// (no '.', not base64url), so a canary signature can never pass for the
// signature of a card, and it is never returned to anyone anyway.
const canaryInput = "cardsign readiness canary: not a card"

// CheckReadiness runs one readiness check now and records its outcome: the
// store answers (key records and the audit head), a key is active, and
// every key due to sign makes a signature that verifies against its
// published key. It is a canary, not a probe: /readyz reports its last
// outcome, so a flood of probes never reaches an HSM or a KMS quota.
func (a *Authority) CheckReadiness(ctx context.Context) error {
	err := a.canary(ctx)
	a.readiness.Store(&readyState{err: err, at: time.Now()})
	if err != nil {
		a.metrics.canaryRuns.WithLabelValues("failed").Inc()
		a.metrics.ready.Set(0)
	} else {
		a.metrics.canaryRuns.WithLabelValues("ok").Inc()
		a.metrics.ready.Set(1)
	}
	return err
}

func (a *Authority) canary(ctx context.Context) error {
	if _, err := a.records(ctx, true); err != nil {
		return err
	}
	if _, _, err := a.store.AuditHead(ctx); err != nil {
		return &UnavailableError{What: "audit log", Err: err}
	}
	// A store that reads but cannot write (a full disk, a read-only
	// mount) would fail every audit commit: prove a durable write.
	if _, err := a.store.NextSequence(ctx, "readiness-canary"); err != nil {
		return &UnavailableError{What: "audit log", Err: fmt.Errorf("write: %w", err)}
	}
	keys, err := a.signingKeys(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys {
		// jose.Sign verifies the signature with the signer's public key;
		// signingKeys tied that key to the published one.
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
	for _, scheme := range backends.Schemes() {
		b, _ := backends.Lookup(scheme)
		if hc, ok := b.(backends.HealthChecker); ok {
			if err := hc.Healthy(ctx); err != nil {
				return fmt.Errorf("%w: %s: %v", backends.ErrUnavailable, scheme, err)
			}
		}
	}
	return nil
}

// keyHealthChecker is implemented by the signers of backends that can tell
// whether an opened key is still where it was opened from (the file
// backend's signer stats its key file).
type keyHealthChecker interface {
	Healthy(ctx context.Context) error
}

// KeyChangedError reports a key whose backend now returns another public
// key than the one recorded (and published) when the key was created or
// imported: the key file or backend key was replaced. Signing with it would
// publish signatures no verifier accepts, so it is refused; an operator
// must restore the key or rotate. It maps to FAILED_PRECONDITION.
type KeyChangedError struct{ KID string }

func (e *KeyChangedError) Error() string {
	return "key " + e.KID + ": the backend's public key is not the one on record; the key was replaced at its backend: restore the original key, or rotate to a new key and revoke " + e.KID
}

// publicKey is what crypto public keys have in common.
type publicKey interface{ Equal(crypto.PublicKey) bool }

// WatchReadiness runs CheckReadiness every interval until ctx is done, each
// check bounded by timeout. A failure is logged when the state changes, not
// on every tick.
//
// notify, when set, sees every check's outcome (the gRPC health service
// follows it).
func (a *Authority) WatchReadiness(ctx context.Context, interval, timeout time.Duration, notify func(error)) {
	a.readyEvery.Store(int64(interval + timeout))
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := a.CheckReadiness(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if notify != nil {
			notify(a.Ready())
		}
		switch {
		case err != nil && (last == nil || last.Error() != err.Error()):
			a.log.Warn("not ready: readiness check failed", "err", err)
		case err == nil && last != nil:
			a.log.Info("ready again")
		}
		last = err
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.recheck:
		}
	}
}

// recheckReadiness asks WatchReadiness for a check now, without waiting for
// it: after revoking the last active key, /readyz should not say ready for
// another interval.
func (a *Authority) recheckReadiness() {
	select {
	case a.recheck <- struct{}{}:
	default:
	}
}

// Ready reports the last readiness check's outcome: nil when the authority
// can sign.
func (a *Authority) Ready() error {
	if a.draining.Load() {
		return ErrDraining
	}
	st := a.readiness.Load()
	if st == nil {
		return ErrNotChecked
	}
	if every := time.Duration(a.readyEvery.Load()); every > 0 && time.Since(st.at) > 3*every {
		return errStale
	}
	return st.err
}
