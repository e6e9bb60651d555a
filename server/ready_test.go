package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/store"
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
	if _, err := a.admin.RevokeKey(ctx, activeKID(t, a), "superseded", true); err != nil {
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

// TestReadinessFollowsTheStoreAtOnce: with PostgreSQL stopped, a failed
// signature makes the replica not ready at once (not at the next check, an
// hour away here), and it is ready again soon after the database is back,
// by prompt re-checks rather than the interval.
func TestReadinessFollowsTheStoreAtOnce(t *testing.T) {
	ctx := t.Context()
	c, st := ownPostgres(t)
	a := newAuthorityOn(t, st, t.TempDir())
	// The first key activates at the database's now, which this process's
	// clock may trail by part of a round trip.
	for deadline := time.Now().Add(5 * time.Second); a.CheckReadiness(ctx) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not ready on a running database: %v", a.CheckReadiness(ctx))
		}
	}
	var health atomic.Pointer[error]
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.WatchReadiness(wctx, time.Hour, 5*time.Second, func(err error) { health.Store(&err) })
	}()
	defer func() { cancel(); <-done }()
	for health.Load() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	if err := *health.Load(); err != nil {
		t.Fatalf("first check: %v", err)
	}
	data := testsupport.Card(t, "divergent.json")
	if _, err := a.Sign(ctx, SignRequest{Card: data}); err != nil {
		t.Fatal(err)
	}

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Sign(ctx, SignRequest{Card: data}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("signing with the database stopped: %v, want store.ErrUnavailable", err)
	}
	// At once: no check has run since (the interval is an hour).
	if err := a.Ready(); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("readiness right after a failed signature: %v, want store.ErrUnavailable", err)
	}
	if p := health.Load(); p == nil || *p == nil {
		t.Fatal("the gRPC health status was not told")
	}
	h := NewHTTPHandler(a, HTTPOptions{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "store unavailable") {
		t.Fatalf("/readyz: %d %s", rec.Code, rec.Body)
	}

	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Ready again by the re-checks made while the store was down (every
	// storeRecheck); the bound only stops a broken build from hanging.
	for deadline := time.Now().Add(60 * time.Second); a.Ready() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not ready a minute after the database came back: %v", a.Ready())
		}
	}
	if _, err := a.Sign(ctx, SignRequest{Card: data}); err != nil {
		t.Fatalf("signing after the database came back: %v", err)
	}
}

// TestReadyzSaysDiskFull: the embedded database on a real small volume
// (a tmpfs: root only, as CI runs it; elsewhere the test says it skipped)
// that fills up: /readyz says "disk full"; once space is freed the next
// check writes again (the WAL checkpointed and truncated first) and the
// authority is ready and signs.
func TestReadyzSaysDiskFull(t *testing.T) {
	dir := testsupport.MountTmpfs(t, "8m")
	ctx := t.Context()
	st := openStore(t, dir)
	a := newAuthorityOn(t, st, t.TempDir())
	if err := a.CheckReadiness(ctx); err != nil {
		t.Fatal(err)
	}
	// An empty WAL, then no space: the canary's durable write must grow it.
	if err := st.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	testsupport.FillVolume(t, filler)
	if err := a.CheckReadiness(ctx); err == nil {
		t.Fatal("ready with the database's volume full")
	}
	h := NewHTTPHandler(a, HTTPOptions{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"disk full"`) {
		t.Fatalf("/readyz with the volume full: %d %s", rec.Code, rec.Body)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckReadiness(ctx); err != nil {
		t.Fatalf("space freed: %v", err)
	}
	data := testsupport.Card(t, "divergent.json")
	if _, err := a.Sign(ctx, SignRequest{Card: data}); err != nil {
		t.Fatalf("signing once space was freed: %v", err)
	}
}
