package testsupport

import (
	"sync"
	"testing"
)

// Hammer starts n goroutines that each call op again and again, until op
// returns false or the returned stop is called, and returns stop, which
// waits for them; a test that ends first (a failure) stops them too. It is
// the load a test keeps up while it reloads, kills or resets what op calls.
func Hammer(t testing.TB, n int, op func() bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if !op() {
					return
				}
			}
		})
	}
	var once sync.Once
	stop = func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
	t.Cleanup(stop)
	return stop
}
