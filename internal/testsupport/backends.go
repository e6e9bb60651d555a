package testsupport

import (
	"context"
	"crypto"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
)

// CheckErr checks a table case's err against want, a text the error must
// contain, or "" when the call must succeed. It reports whether the call
// succeeded as wanted, that is whether the case's result is worth checking
// further: a case that wants an error ends with it.
func CheckErr(t testing.TB, name string, err error, want string) bool {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v", name, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: error %v, want one containing %q", name, err, want)
	}
	return want == "" && err == nil
}

// FIFO makes a named pipe at path that nobody writes to: the special file
// on which a reader that opens before it checks blocks in open(2). When the
// test ends it opens the write end once, so that a reader stuck by a
// failing test is released.
func FIFO(t testing.TB, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	return path
}

// Within runs f in a goroutine and returns what it returns, but fails t,
// instead of hanging it, when f has not returned within 10s (as an open(2)
// of a FIFO nobody writes to would not). what names the call for the
// failure.
func Within[T any](t testing.TB, what string, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10s", what)
		var zero T
		return zero, nil
	}
}

// SignConcurrently signs n inputs at once (input(i) for i from 0 to n-1),
// one goroutine each, through jose.Sign with alg, and verifies every
// signature with pub as a relying party would, besides jose.Sign's own
// check. It returns each input's error, in order: nil where the signature
// was made and verifies.
func SignConcurrently(ctx context.Context, signer crypto.Signer, alg jose.Alg, pub crypto.PublicKey, n int, input func(i int) []byte) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			in := input(i)
			sig, err := jose.Sign(ctx, signer, alg, in)
			if err == nil {
				err = jose.Verify(alg, pub, in, sig)
			}
			if err != nil {
				errs[i] = fmt.Errorf("signature %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return errs
}
