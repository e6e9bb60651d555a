package postgres

import (
	"testing"
	"time"
)

// TestOutageLog: an outage of reconnects once a second logs its first
// failure, then one line a watchLogEvery with the attempts it stands for,
// and its end once.
func TestOutageLog(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var o outageLog
	if was, _ := o.ended(t0); was {
		t.Fatal("ended before any failure")
	}
	type step struct {
		at       time.Duration
		log      bool
		attempts int
	}
	steps := []step{{0, true, 1}}
	for s := 1; s < 60; s++ {
		steps = append(steps, step{time.Duration(s) * time.Second, false, 0})
	}
	steps = append(steps, step{60 * time.Second, true, 60}, step{61 * time.Second, false, 0})
	logged := 0
	for _, s := range steps {
		log, attempts, down := o.failed(t0.Add(s.at))
		if log != s.log || attempts != s.attempts {
			t.Fatalf("failure at +%s: log %v attempts %d, want %v %d", s.at, log, attempts, s.log, s.attempts)
		}
		if log {
			logged++
			if down != s.at {
				t.Errorf("failure at +%s: down for %s", s.at, down)
			}
		}
	}
	if logged != 2 {
		t.Fatalf("%d lines for a 61 s outage, want 2", logged)
	}
	if was, down := o.ended(t0.Add(62 * time.Second)); !was || down != 62*time.Second {
		t.Fatalf("ended: %v %s", was, down)
	}
	// A new outage starts afresh.
	if log, attempts, _ := o.failed(t0.Add(63 * time.Second)); !log || attempts != 1 {
		t.Fatalf("next outage's first failure: log %v attempts %d", log, attempts)
	}
}
