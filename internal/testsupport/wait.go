package testsupport

import (
	"fmt"
	"testing"
	"time"
)

// WaitFor polls cond until it holds, and fails the test if it still does not
// after timeout. It is for what a test cannot be told about and must watch
// for: a goroutine that reached a queue, a file a server wrote, a process
// gone. The poll starts at a millisecond, so that a quick condition costs the
// test little, and backs off to 50ms, so that a slow one (a process to reap)
// costs the machine little.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(pause)
	}
}

// DeliveredInOrder checks what an at-least-once receiver got: the
// sequence numbers 1..n in order, where a number may come again only as a
// redelivery of one already received (after a crash or a failover) and
// none is skipped. It returns how many were redeliveries.
func DeliveredInOrder(seqs []int64, n int64) (redelivered int, err error) {
	var high int64
	for i, s := range seqs {
		switch {
		case s == high+1:
			high = s
		case s <= high:
			redelivered++
		default:
			return redelivered, fmt.Errorf("delivery %d is seq %d after %d: a gap", i, s, high)
		}
	}
	if high != n {
		return redelivered, fmt.Errorf("delivered up to %d, want %d", high, n)
	}
	return redelivered, nil
}
