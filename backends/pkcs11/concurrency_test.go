//go:build cgo && !nopkcs11

package pkcs11

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cardsign/cardsign/jose"
)

// TestConcurrentSign signs from 8 goroutines, 500 times each, through one
// Handle, and verifies every signature independently of jose.Sign's own
// check, with the key's JWK.
func TestConcurrentSign(t *testing.T) {
	const goroutines, each = 8, 500
	b, _ := newBackend(t, Config{Token: env.main.label, PIN: env.main.pin})
	_, h := newES256Key(t, b, uniq("concurrent"))
	jwk, _ := jose.NewJWK(h.Signer.Public(), "", jose.ES256)
	pub, err := jwk.PublicKey()
	if err != nil {
		t.Fatal(err)
	}

	var verified atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				input := fmt.Appendf(nil, "eyJhbGciOiJFUzI1NiJ9.%d-%d", g, i)
				sig, err := jose.Sign(t.Context(), h.Signer, jose.ES256, input)
				if err != nil {
					errs <- fmt.Errorf("goroutine %d signature %d: %w", g, i, err)
					return
				}
				if err := jose.Verify(jose.ES256, pub, input, sig); err != nil {
					errs <- fmt.Errorf("goroutine %d signature %d does not verify: %w", g, i, err)
					return
				}
				verified.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := verified.Load(); n != goroutines*each {
		t.Errorf("%d signatures verified, want %d", n, goroutines*each)
	}
	tok := tokenOf(t, b, env.main.label)
	tok.mu.Lock()
	idle := len(tok.idle)
	tok.mu.Unlock()
	// The pool was used concurrently and stayed within its size.
	if idle < 2 || idle > tok.size {
		t.Errorf("%d idle sessions after the run, want 2..%d", idle, tok.size)
	}
	if n := tok.reinits.Load(); n != 0 {
		t.Errorf("%d re-initializations without any fault", n)
	}
}
