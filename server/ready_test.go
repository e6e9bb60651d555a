package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestReadinessIsTheLastCanary(t *testing.T) {
	ctx := context.Background()
	a, _ := newAuthority(t)
	if err := a.Ready(); !errors.Is(err, ErrNotChecked) {
		t.Fatalf("before any check: %v", err)
	}
	if err := a.CheckReadiness(ctx); err != nil {
		t.Fatalf("canary: %v", err)
	}
	if err := a.Ready(); err != nil {
		t.Fatalf("after a good canary: %v", err)
	}
	// The key file disappears and the cached signer is dropped, as after a
	// restart: the next canary fails and readiness follows it, not before.
	uri := activeView(t, a).URI
	a.keys.forget()
	if err := os.Remove(filepath.Clean(uri[len("file:"):])); err != nil {
		t.Fatal(err)
	}
	if err := a.Ready(); err != nil {
		t.Fatalf("readiness changed without a check: %v", err)
	}
	if err := a.CheckReadiness(ctx); err == nil {
		t.Fatal("canary passed without the key file")
	}
	if err := a.Ready(); err == nil {
		t.Fatal("ready after a failed canary")
	}
	a.Drain()
	if err := a.Ready(); !errors.Is(err, ErrDraining) {
		t.Fatalf("draining: %v", err)
	}
}

// TestReadinessRecheck: a key change asks the watcher for a check at once
// (requests coalesce), and a watcher that stopped reporting makes the last
// outcome stale.
func TestReadinessRecheck(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a, _ := newAuthority(t)
	var checks atomic.Int32
	notified := make(chan error, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.WatchReadiness(ctx, time.Hour, 10*time.Second, func(err error) { checks.Add(1); notified <- err })
	}()
	if err := <-notified; err != nil {
		t.Fatalf("first check: %v", err)
	}
	// Revoking the only active key must show within the hour's interval.
	if _, err := a.RevokeKey(ctx, activeKID(t, a), "superseded", true); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-notified:
		if !errors.Is(err, ErrNoActiveKey) {
			t.Fatalf("after revoking the only active key: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no readiness check after a key change")
	}
	cancel()
	<-done

	r := a.readiness
	r.request()
	r.request() // a second request while one is pending is the same request
	if len(r.recheck) != 1 {
		t.Fatalf("%d pending rechecks", len(r.recheck))
	}
	r.last.Store(&readyState{at: time.Now().Add(-time.Hour)})
	r.every.Store(int64(time.Second))
	if err := a.Ready(); !errors.Is(err, errStale) {
		t.Fatalf("a check an hour old with a one-second period: %v", err)
	}
}
