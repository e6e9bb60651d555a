//go:build cgo && !nopkcs11

package pkcs11

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	p11 "github.com/miekg/pkcs11"
)

// token is one logged-in token and its session pool, shared by every key
// opened on it. It owns recovery: when sessions die it re-initializes
// (close all sessions, find the token again, open, log in) and, if the token
// cannot be reached, re-initializes the module; keys find their object
// handles again lazily, by generation.
type token struct {
	m      *module
	log    *slog.Logger
	name   string // for messages: `"label" (serial S)`
	label  string
	serial string
	pin    string // never logged, never put into an error
	size   int    // pool capacity

	// sem has one slot per session that may be in use at once: it sizes the
	// pool and lets reinit wait until no goroutine holds an old session.
	sem chan struct{}
	// recovery is held by the one goroutine re-initializing the token.
	recovery chan struct{}

	mu     sync.Mutex // guards everything below
	slot   uint
	gen    uint64 // bumped by every successful re-initialization
	mgen   uint64 // the module generation the sessions belong to
	anchor p11.SessionHandle
	idle   []p11.SessionHandle
	down   error // why the token is unusable; nil when it is up
	fatal  error // a PIN the token refused during recovery: never retried
	bo     backoff
	closed bool

	reinits atomic.Int64 // token re-initializations, for tests and logs
}

// session is a pool session and the token generation it belongs to.
type session struct {
	h    p11.SessionHandle
	gen  uint64
	slot uint
}

// newToken logs in to a token just found and starts its pool. The caller
// holds the module's rw lock shared.
func newToken(m *module, ft foundToken, pin string, poolSize int, log *slog.Logger) (*token, error) {
	size := poolSize
	// Sessions are read-only, so the limit is ulMaxSessionCount; one session
	// is the anchor that holds the login.
	if maxS := ft.info.MaxSessionCount; maxS != p11.CK_EFFECTIVELY_INFINITE && maxS != p11.CK_UNAVAILABLE_INFORMATION {
		size = max(1, min(size, int(min(maxS, 1<<20))-1))
	}
	t := &token{
		m:        m,
		name:     fmt.Sprintf("%q (serial %s)", ft.info.Label, ft.info.SerialNumber),
		label:    ft.info.Label,
		serial:   ft.info.SerialNumber,
		pin:      pin,
		size:     size,
		sem:      make(chan struct{}, size),
		recovery: make(chan struct{}, 1),
		slot:     ft.slot,
		gen:      1,
		mgen:     m.gen,
	}
	t.log = log.With("token", ft.info.Label, "serial", ft.info.SerialNumber)
	anchor, err := t.openAndLogin(m.ctx, ft)
	if err != nil {
		return nil, err
	}
	t.anchor = anchor
	t.log.Info("pkcs11: token opened", "slot_id", ft.slot, "pool_size", size)
	return t, nil
}

// want returns the URI attributes that find this token again: its serial,
// which (unlike the label) no other token shares.
func (t *token) want() map[string]string {
	if t.serial != "" {
		return map[string]string{"serial": t.serial}
	}
	return map[string]string{"token": t.label}
}

// openAndLogin opens the anchor session and logs the user in, which logs in
// every session of this process on the token. CKR_USER_ALREADY_LOGGED_IN is
// success: another session of this process did it (PKCS#11 login is per
// application, so the PIN is not checked again in that case).
func (t *token) openAndLogin(c *p11.Ctx, ft foundToken) (p11.SessionHandle, error) {
	sh, err := c.OpenSession(ft.slot, p11.CKF_SERIAL_SESSION)
	if err != nil {
		return 0, fmt.Errorf("C_OpenSession: %w", err)
	}
	if ft.info.Flags&p11.CKF_LOGIN_REQUIRED == 0 {
		return sh, nil
	}
	if t.pin == "" {
		_ = c.CloseSession(sh)
		return 0, &PINError{Token: t.name, Reason: "not given: put pin-source or pin-value into the URI, or configure one"}
	}
	if err := c.Login(sh, p11.CKU_USER, t.pin); err != nil && !errors.Is(err, p11.Error(p11.CKR_USER_ALREADY_LOGGED_IN)) {
		_ = c.CloseSession(sh)
		if pinRefused(err) {
			return 0, &PINError{Token: t.name, Reason: pinReason(err), Code: err}
		}
		return 0, fmt.Errorf("C_Login: %w", err)
	}
	return sh, nil
}

func (t *token) unavailable(err error) error { return &UnavailableError{Token: t.name, Err: err} }

// run calls fn with a pool session. When fn (or the pool) reports a dead
// session, run re-initializes the token and calls fn once more; fn must
// therefore be safe to repeat, and must find object handles again when the
// session's generation changed.
func (t *token) run(ctx context.Context, fn func(c *p11.Ctx, s session) error) error {
	for attempt := 0; ; attempt++ {
		gen, err := t.do(ctx, fn)
		if err == nil || !deadSession(err) {
			return err
		}
		if attempt == 1 {
			return t.unavailable(err)
		}
		if err := t.recover(ctx, gen, err); err != nil {
			return err
		}
	}
}

// do runs fn once with a session, failing fast when the token is down.
func (t *token) do(ctx context.Context, fn func(c *p11.Ctx, s session) error) (uint64, error) {
	t.mu.Lock()
	gen := t.gen
	switch {
	case t.closed:
		t.mu.Unlock()
		return gen, t.unavailable(ErrClosed)
	case t.fatal != nil:
		t.mu.Unlock()
		return gen, t.unavailable(t.fatal)
	case t.down != nil && !t.bo.allowed(time.Now()):
		err := t.down
		t.mu.Unlock()
		return gen, t.unavailable(err)
	case t.down != nil:
		t.mu.Unlock()
		return gen, errDown
	}
	t.mu.Unlock()

	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return gen, fmt.Errorf("waiting for a session of token %s: %w", t.name, ctx.Err())
	}
	defer func() { <-t.sem }()
	if !t.m.rw.TryRLock() {
		return gen, t.unavailable(errors.New("module re-initialization in progress"))
	}
	defer t.m.rw.RUnlock()
	if t.m.closed {
		return gen, t.unavailable(ErrClosed)
	}
	s, err := t.get()
	if err != nil {
		return s.gen, err
	}
	err = fn(t.m.ctx, s)
	if err != nil && !deadSession(err) {
		// A session closed under a call in flight does not always say so:
		// SoftHSM2 answers C_SignInit racing C_CloseAllSessions with
		// CKR_GENERAL_ERROR. Ask the session itself before calling the
		// error final.
		if _, perr := t.m.ctx.GetSessionInfo(s.h); deadSession(perr) {
			err = fmt.Errorf("session gone (%w) after: %w", perr, err)
		}
	}
	t.put(s, err)
	return s.gen, err
}

// get takes an idle session or opens one. The caller holds a sem slot and
// the module's rw lock shared.
func (t *token) get() (session, error) {
	t.mu.Lock()
	gen, slot := t.gen, t.slot
	if t.mgen != t.m.gen {
		t.mu.Unlock()
		return session{gen: gen}, errStale
	}
	if n := len(t.idle); n > 0 {
		h := t.idle[n-1]
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		return session{h: h, gen: gen, slot: slot}, nil
	}
	t.mu.Unlock()
	// New sessions share the anchor's login.
	h, err := t.m.ctx.OpenSession(slot, p11.CKF_SERIAL_SESSION)
	if err != nil {
		return session{gen: gen}, fmt.Errorf("C_OpenSession: %w", err)
	}
	return session{h: h, gen: gen, slot: slot}, nil
}

// put returns a session after fn. A session that saw a dead-session error is
// dropped without C_CloseSession (its handle may already name another
// session); reinit's C_CloseAllSessions cleans up. One that saw any other
// error is closed, in case an operation was left active on it.
func (t *token) put(s session, err error) {
	t.mu.Lock()
	current := s.gen == t.gen
	if current && err == nil {
		t.idle = append(t.idle, s.h)
	}
	t.mu.Unlock()
	if current && err != nil && !deadSession(err) {
		_ = t.m.ctx.CloseSession(s.h) // the anchor keeps the login
	}
}

// recover re-initializes the token after fn saw cause on a session of
// generation seen. Only one goroutine recovers at a time; while the token is
// known to be down the others fail fast, otherwise they wait for its result.
func (t *token) recover(ctx context.Context, seen uint64, cause error) error {
	select {
	case t.recovery <- struct{}{}:
	default:
		t.mu.Lock()
		known := t.fatal
		if known == nil {
			known = t.down
		}
		t.mu.Unlock()
		if known != nil {
			return t.unavailable(known) // someone is re-trying it right now
		}
		select {
		case t.recovery <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("waiting for token %s to re-initialize: %w", t.name, ctx.Err())
		}
	}
	defer func() { <-t.recovery }()

	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return t.unavailable(ErrClosed)
	case t.fatal != nil:
		t.mu.Unlock()
		return t.unavailable(t.fatal)
	case t.gen != seen && t.down == nil:
		t.mu.Unlock()
		return nil // another goroutine re-initialized since fn got its session
	case !t.bo.allowed(time.Now()):
		err := t.down
		if err == nil {
			err = fmt.Errorf("re-initialized less than %v ago: %w", minBackoff, cause)
		}
		t.mu.Unlock()
		return t.unavailable(err)
	}
	t.mu.Unlock()

	err := t.reinit(ctx, cause)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// The caller gave up waiting for sessions in use; nothing was
		// changed, so neither the token's state nor its backoff is.
		return err
	}

	t.mu.Lock()
	wait := t.bo.record(time.Now(), err == nil)
	t.down = err
	var pinErr *PINError
	if errors.As(err, &pinErr) {
		// The PIN changed under us. Trying it again every few seconds could
		// lock the token (most HSMs count failures), so stop until restart.
		t.fatal = err
	}
	t.mu.Unlock()
	if err != nil {
		t.log.Error("pkcs11: token unavailable", "err", err, "retry_in", wait, "fatal", pinErr != nil)
		return t.unavailable(err)
	}
	t.log.Info("pkcs11: token re-initialized", "generation", t.generation())
	return nil
}

func (t *token) generation() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gen
}

// reinit is the recovery itself: wait for every session in use to come back
// (so nobody still holds an old handle when new sessions, which may reuse the
// numbers, are opened), re-open the token, and if it cannot be reached
// re-initialize the module and try once more.
func (t *token) reinit(ctx context.Context, cause error) error {
	t.reinits.Add(1)
	t.log.Warn("pkcs11: token sessions lost; re-initializing", "cause", cause)
	for i := 0; i < cap(t.sem); i++ {
		select {
		case t.sem <- struct{}{}:
		case <-ctx.Done():
			for ; i > 0; i-- {
				<-t.sem
			}
			return fmt.Errorf("waiting for sessions in use: %w", ctx.Err())
		}
	}
	defer func() {
		for i := 0; i < cap(t.sem); i++ {
			<-t.sem
		}
	}()
	err := t.reopen()
	var pinErr *PINError
	if err != nil && unreachable(err) && !errors.As(err, &pinErr) {
		t.log.Warn("pkcs11: token unreachable; re-initializing the module", "err", err)
		if merr := t.m.reinit(); merr != nil {
			return merr
		}
		err = t.reopen()
	}
	return err
}

// reopen closes every session of the process on the token (which also logs
// out, so the login that follows is a real one), finds the token again by
// serial, and opens a logged-in anchor session. Callers hold every sem slot.
func (t *token) reopen() error {
	m := t.m
	m.rw.RLock()
	defer m.rw.RUnlock()
	if m.closed {
		return ErrClosed
	}
	t.mu.Lock()
	slot, current := t.slot, t.mgen == m.gen
	t.idle = nil
	t.mu.Unlock()
	if current {
		// After a module re-initialization the sessions are gone already and
		// the slot number may name another token.
		_ = m.ctx.CloseAllSessions(slot)
	}
	ft, err := findToken(m.ctx, m.path, t.want(), fmt.Sprintf("serial=%q", t.serial))
	if err != nil {
		return err
	}
	anchor, err := t.openAndLogin(m.ctx, ft)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.slot, t.anchor, t.mgen = ft.slot, anchor, m.gen
	t.gen++
	t.mu.Unlock()
	return nil
}

// check is the readiness probe: nil when the token answers and the anchor
// session is still logged in. It runs like a signature (pool session,
// recovery, fail-fast while down), so /readyz also brings a token back when
// nothing is being signed. Going through the pool matters: recovery closes
// sessions only while it holds every pool slot, and SoftHSM2 crashes when a
// session is closed under a call in flight.
func (t *token) check(ctx context.Context) error {
	err := t.run(ctx, func(c *p11.Ctx, s session) error {
		info, err := c.GetTokenInfo(s.slot)
		if err != nil {
			return fmt.Errorf("%w: C_GetTokenInfo: %w", errGone, err)
		}
		if info.SerialNumber != t.serial {
			return fmt.Errorf("%w: slot %d now holds token %q (serial %s)", errGone, s.slot, info.Label, info.SerialNumber)
		}
		t.mu.Lock()
		anchor := t.anchor
		t.mu.Unlock()
		si, err := c.GetSessionInfo(anchor)
		switch {
		case deadSession(err):
			return fmt.Errorf("anchor session: %w", err)
		case err != nil:
			return fmt.Errorf("%w: anchor session: C_GetSessionInfo: %w", errGone, err)
		case si.State == p11.CKS_RO_PUBLIC_SESSION && info.Flags&p11.CKF_LOGIN_REQUIRED != 0:
			return fmt.Errorf("anchor session: %w", p11.Error(p11.CKR_USER_NOT_LOGGED_IN))
		}
		return nil
	})
	var ue *UnavailableError
	if err != nil && !errors.As(err, &ue) {
		return t.unavailable(err)
	}
	return err
}
