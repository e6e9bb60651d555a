//go:build cgo && !nopkcs11

package pkcs11

import (
	"crypto"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	p11 "github.com/miekg/pkcs11"
)

// signer opens a new ES256 key on f's token and returns a function that
// signs and verifies with it.
func newSigner(t *testing.T, b *Backend, label string) (backends.Handle, func() error) {
	t.Helper()
	_, h := newES256Key(t, b, label)
	return h, func() error {
		input := []byte("eyJhbGciOiJFUzI1NiJ9.e30")
		sig, err := jose.Sign(t.Context(), h.Signer, jose.ES256, input)
		if err != nil {
			return err
		}
		return jose.Verify(jose.ES256, h.Signer.Public(), input, sig)
	}
}

// TestRecoverSessionReset closes every session of the process on the token
// from a second miekg/pkcs11 handle, as a token reset (or another library
// user calling C_CloseAllSessions) does: the sessions, the login and the
// object handles are gone. Signing carries on without a restart.
func TestRecoverSessionReset(t *testing.T) {
	b, logs := newBackend(t, Config{Token: env.reset.label, PIN: env.reset.pin})
	_, sign := newSigner(t, b, uniq("reset"))
	tok := tokenOf(t, b, env.reset.label)
	raw := openRaw(t, env.reset)
	if err := sign(); err != nil {
		t.Fatal(err)
	}

	reset := func() {
		t.Helper()
		// Land the reset between calls: SoftHSM2 2.6 crashes (SIGSEGV in
		// C_Sign) when C_CloseAllSessions from another thread frees a session
		// that a C_Sign is using. Holding every pool slot keeps the backend's
		// calls out of the library meanwhile; they wait, they do not fail.
		for range cap(tok.sem) {
			tok.sem <- struct{}{}
		}
		defer func() {
			for range cap(tok.sem) {
				<-tok.sem
			}
		}()
		if err := raw.c.CloseAllSessions(raw.slot); err != nil {
			t.Fatalf("C_CloseAllSessions: %v", err)
		}
		// Proof that the reset reached the backend's sessions.
		tok.mu.Lock()
		anchor := tok.anchor
		tok.mu.Unlock()
		if _, err := raw.c.GetSessionInfo(anchor); !errors.Is(err, p11.Error(p11.CKR_SESSION_HANDLE_INVALID)) {
			t.Fatalf("the backend's anchor session survived the reset: %v", err)
		}
	}

	// One reset, one signature: re-initialized once, no module re-init.
	reset()
	if err := sign(); err != nil {
		t.Fatalf("sign after reset: %v", err)
	}
	if n, m := tok.reinits.Load(), tok.m.reinits.Load(); n != 1 || m != 0 {
		t.Errorf("token re-initialized %d times, module %d; want 1 and 0", n, m)
	}
	if !strings.Contains(logs.String(), "CKR_SESSION_HANDLE_INVALID") {
		t.Errorf("the log does not show the dead-session error:\n%s", logs)
	}

	// A second reset within 500ms of the re-initialization is not chased:
	// the signature fails fast as unavailable, and works once the pause is
	// over.
	reset()
	var ue *UnavailableError
	if err := sign(); !errors.As(err, &ue) {
		t.Errorf("sign right after a second reset: %v, want *UnavailableError", err)
	}
	time.Sleep(minBackoff + 100*time.Millisecond)
	if err := sign(); err != nil {
		t.Errorf("sign after the pause: %v", err)
	}
	if err := b.Healthy(t.Context()); err != nil {
		t.Errorf("Healthy: %v", err)
	}

	// Resets under load: 8 goroutines keep signing through 3 resets; not one
	// signature fails, because the failed attempt is retried after the
	// re-initialization.
	before := tok.reinits.Load()
	var signed, failed atomic.Int64
	var firstErr atomic.Value
	stop := testsupport.Hammer(t, 8, func() bool {
		if err := sign(); err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err)
		} else {
			signed.Add(1)
		}
		return true
	})
	const resets = 3
	for i := range resets {
		time.Sleep(minBackoff + 200*time.Millisecond)
		reset()
		for deadline := time.Now().Add(5 * time.Second); tok.reinits.Load() < before+int64(i)+1; {
			if time.Now().After(deadline) {
				t.Fatalf("no re-initialization after reset %d", i+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(100 * time.Millisecond)
	stop()
	t.Logf("under load: %d signatures, %d failures, %d re-initializations", signed.Load(), failed.Load(), tok.reinits.Load()-before)
	if n := failed.Load(); n != 0 {
		t.Errorf("%d signatures failed across the resets; first: %v", n, firstErr.Load())
	}
	if n := tok.reinits.Load() - before; n != resets {
		t.Errorf("%d re-initializations for %d resets", n, resets)
	}
	if tok.m.reinits.Load() != 0 {
		t.Error("a session reset re-initialized the module")
	}
}

// TestRecoverFinalized has another user of the library in the process call
// C_Finalize: every call answers CKR_CRYPTOKI_NOT_INITIALIZED, and the
// backend initializes the module again.
func TestRecoverFinalized(t *testing.T) {
	b, _ := newBackend(t, Config{Token: env.reset.label, PIN: env.reset.pin})
	_, sign := newSigner(t, b, uniq("finalized"))
	tok := tokenOf(t, b, env.reset.label)
	raw := openRaw(t, env.reset)
	if err := raw.c.Finalize(); err != nil {
		t.Fatalf("C_Finalize: %v", err)
	}
	if err := sign(); err != nil {
		t.Fatalf("sign after C_Finalize: %v", err)
	}
	if n, m := tok.reinits.Load(), tok.m.reinits.Load(); n != 1 || m != 1 {
		t.Errorf("token re-initialized %d times, module %d; want 1 and 1", n, m)
	}
}

// TestTokenUnreachable moves the token's directory away, which is as close
// to pulling an HSM as SoftHSM2 gets: the token stops answering
// (C_GetTokenInfo fails, its objects vanish). Signing then fails fast with
// *UnavailableError; when the directory is back, signing resumes through the
// same Handle. SoftHSM only sees the token again after C_Finalize and
// C_Initialize, so this also exercises the module re-initialization.
func TestTokenUnreachable(t *testing.T) {
	b, logs := newBackend(t, Config{Token: env.away.label, PIN: env.away.pin})
	label := uniq("away")
	h, sign := newSigner(t, b, label)
	tok := tokenOf(t, b, env.away.label)
	dir := tokenDirOf(t, tok.serial)
	if err := sign(); err != nil {
		t.Fatal(err)
	}

	away := filepath.Join(filepath.Dir(env.tokenDir), "moved-away")
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(away, dir) })

	var ue *UnavailableError
	start := time.Now()
	err := sign()
	t.Logf("first signature after the token vanished: %v after %v", err, time.Since(start))
	if !errors.As(err, &ue) || !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("sign with the token gone: %v, want *UnavailableError and backends.ErrUnavailable", err)
	}
	if tok.m.reinits.Load() == 0 {
		t.Error("the module was not re-initialized")
	}
	// While it is down, signing does not touch the token.
	var slowest time.Duration
	for range 200 {
		start := time.Now()
		err := sign()
		slowest = max(slowest, time.Since(start))
		if !errors.As(err, &ue) {
			t.Fatalf("sign while down: %v, want *UnavailableError", err)
		}
	}
	t.Logf("slowest of 200 failures while down: %v", slowest)
	if slowest > 50*time.Millisecond {
		t.Errorf("failing while down took up to %v; want fast failures", slowest)
	}
	if err := b.Healthy(t.Context()); !errors.As(err, &ue) {
		t.Errorf("Healthy while down: %v, want *UnavailableError", err)
	}

	// Back again: Healthy (as /readyz would) brings the token back within
	// the backoff, and the old Handle signs.
	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	for b.Healthy(t.Context()) != nil {
		if time.Since(start) > 2*maxBackoff {
			t.Fatalf("token not back after %v: %v", time.Since(start), b.Healthy(t.Context()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("healthy again %v after the directory came back; %d token, %d module re-initializations",
		time.Since(start), tok.reinits.Load(), tok.m.reinits.Load())
	if err := sign(); err != nil {
		t.Fatalf("sign after the token came back: %v", err)
	}
	if !strings.Contains(logs.String(), "module re-initialized") {
		t.Errorf("the log does not show the module re-initialization:\n%s", logs)
	}

	// Deleted and re-created under the same label, it is another token (new
	// serial) without the key: never mistaken for the old one.
	for _, args := range [][]string{
		{"--delete-token", "--token", env.away.label},
		{"--init-token", "--free", "--label", env.away.label, "--pin", env.away.pin, "--so-pin", soPIN},
	} {
		if out, err := exec.Command("softhsm2-util", args...).CombinedOutput(); err != nil {
			t.Fatalf("softhsm2-util %s: %v\n%s", args[0], err, out)
		}
	}
	var nf *TokenNotFoundError
	start = time.Now()
	for err = b.Healthy(t.Context()); !errors.As(err, &nf); err = b.Healthy(t.Context()) {
		if time.Since(start) > 2*maxBackoff {
			t.Fatalf("Healthy after re-creation: %v, want *UnavailableError from *TokenNotFoundError", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := h.Signer.Sign(nil, make([]byte, 32), crypto.SHA256); !errors.As(err, &ue) {
		t.Errorf("the old key on the re-created token: %v, want *UnavailableError", err)
	}
	var knf *KeyNotFoundError
	if _, err := b.Open(t.Context(), "pkcs11:token="+env.away.label+";object="+label); !errors.As(err, &knf) {
		t.Errorf("Open on the re-created token: %v, want *KeyNotFoundError", err)
	}
}

// TestClosed checks that a closed Backend refuses work with
// *UnavailableError instead of calling into a finalized library.
func TestClosed(t *testing.T) {
	b, _ := newBackend(t, Config{Token: env.main.label, PIN: env.main.pin})
	label := uniq("closed")
	_, sign := newSigner(t, b, label)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	var ue *UnavailableError
	if err := sign(); !errors.As(err, &ue) || !errors.Is(err, ErrClosed) {
		t.Errorf("sign after Close: %v", err)
	}
	if err := b.Healthy(t.Context()); !errors.As(err, &ue) {
		t.Errorf("Healthy after Close: %v", err)
	}
	if _, err := b.Open(t.Context(), "pkcs11:token="+env.main.label+";object="+label); !errors.Is(err, ErrClosed) {
		t.Errorf("Open after Close: %v", err)
	}
}
