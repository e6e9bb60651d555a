//go:build cgo && !nopkcs11

package pkcs11

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var b backoff
	if !b.allowed(t0) {
		t.Fatal("the first attempt must be allowed at once")
	}
	// ok is the outcome of the attempt; wait the pause that follows.
	steps := []struct {
		ok   bool
		wait time.Duration
	}{
		{false, 500 * time.Millisecond},
		{false, time.Second},
		{false, 2 * time.Second},
		{false, 4 * time.Second},
		{false, 8 * time.Second},
		{false, 10 * time.Second},
		{false, 10 * time.Second},
		{true, 500 * time.Millisecond}, // recovered: back to the minimum
		{false, 500 * time.Millisecond},
		{false, time.Second},
	}
	now := t0
	for i, s := range steps {
		wait := b.record(now, s.ok)
		if wait != s.wait {
			t.Errorf("step %d: pause %v, want %v", i, wait, s.wait)
		}
		if b.allowed(now.Add(wait - time.Nanosecond)) {
			t.Errorf("step %d: allowed before the pause is over", i)
		}
		if !b.allowed(now.Add(wait)) {
			t.Errorf("step %d: not allowed after the pause", i)
		}
		now = now.Add(wait)
	}
}
