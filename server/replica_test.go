package server

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlite"
)

// TestReplicaNameClaimedOnce: a second process configured with a replica
// name a live process holds is refused with a clear error; another name
// starts at once; the name is free again at once after a clean stop, and
// after its holder was killed (stopped renewing) once its lease lapses.
func TestReplicaNameClaimedOnce(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "cardsign.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		testReplicaNameClaimedOnce(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		testReplicaNameClaimedOnce(t, sharedPostgres(t))
	})
}

func testReplicaNameClaimedOnce(t *testing.T, st store.Store) {
	ctx := t.Context()
	named := func(name string) *Authority {
		a := NewAuthority(Config{KeyBackend: "file", KeyDir: t.TempDir(), DefaultAlg: jose.ES256, Replica: name},
			st, slog.New(slog.DiscardHandler))
		t.Cleanup(func() { a.Close() })
		return a
	}
	first := named("cs-1")
	if err := first.ClaimReplica(ctx); err != nil {
		t.Fatal(err)
	}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); first.RunDuties(dctx) }()

	// The duplicate sees the live holder renew within leaseRenew.
	err := named("cs-1").ClaimReplica(ctx)
	var inUse *ReplicaNameInUseError
	if !errors.As(err, &inUse) || inUse.Name != "cs-1" || inUse.Instance != first.duties.instance {
		t.Fatalf("a second process named cs-1 while the first runs: %v, want *ReplicaNameInUseError naming the first", err)
	}
	for _, want := range []string{`"cs-1"`, "replica name", "leave replica unset"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if err := named("cs-2").ClaimReplica(ctx); err != nil {
		t.Fatalf("another name: %v", err)
	}

	// A clean stop releases the name: the next process under it starts at
	// once (well within the lease's TTL).
	stop()
	<-done
	start := time.Now()
	if err := named("cs-1").ClaimReplica(ctx); err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	if d := time.Since(start); d >= leaseTTL {
		t.Errorf("claiming a released name took %s", d)
	}

	// A killed holder stops renewing: its name is taken once the lease
	// lapses.
	if err := named("cs-3").ClaimReplica(ctx); err != nil {
		t.Fatal(err)
	}
	if err := named("cs-3").ClaimReplica(ctx); err != nil {
		t.Fatalf("after the holder stopped renewing: %v", err)
	}
}

// TestReplicaNameLostStopsDuties: a replica whose name lease lapsed and was
// taken by another process under the same name stops its cluster duties at
// once (it no longer believes it holds the duties lease, and does not take
// it again) and is not ready, until it claims its name back.
func TestReplicaNameLostStopsDuties(t *testing.T) {
	ctx := t.Context()
	_, dir := newAuthority(t)
	first := replicaOf(t, dir, "cs-1", 0)
	if err := first.ClaimReplica(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.dutyRound(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := first.duties.held(ctx); err != nil || !ok {
		t.Fatalf("first does not hold the duties lease: %v", err)
	}
	if err := first.CheckReadiness(ctx); err != nil {
		t.Fatal(err)
	}

	// The name's lease lapses (as after the store was unreachable for
	// longer than its TTL), and a second process under the name takes it.
	first.duties.mu.Lock()
	name := first.duties.name
	first.duties.mu.Unlock()
	if err := first.store.ReleaseLease(ctx, name); err != nil {
		t.Fatal(err)
	}
	second := replicaOf(t, dir, "cs-1", 0)
	if err := second.ClaimReplica(ctx); err != nil {
		t.Fatal(err)
	}

	err := first.dutyRound(ctx)
	var lost *ReplicaNameLostError
	if !errors.As(err, &lost) || lost.Name != "cs-1" || lost.Other != second.duties.instance {
		t.Fatalf("first's duty round after losing its name: %v, want *ReplicaNameLostError naming the second", err)
	}
	if _, ok, _ := first.duties.held(ctx); ok {
		t.Fatal("first still believes it holds the duties lease after losing its name")
	}
	if err := first.Ready(); !errors.As(err, &lost) {
		t.Fatalf("first's readiness after losing its name: %v, want not ready", err)
	}
	if err := second.dutyRound(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := second.duties.held(ctx); err != nil || !ok {
		t.Fatalf("second does not hold the duties lease: %v", err)
	}

	// The second stops: the first claims its name back and resumes.
	second.duties.release(ctx)
	second.duties.releaseName(ctx)
	if err := first.dutyRound(ctx); err != nil {
		t.Fatalf("first after the second stopped: %v", err)
	}
	if _, ok, err := first.duties.held(ctx); err != nil || !ok {
		t.Fatalf("first does not hold the duties lease again: %v", err)
	}
	if err := first.Ready(); err != nil {
		t.Fatalf("first not ready after claiming its name back: %v", err)
	}
}

// PrecheckReplica, reading only: no lease or a lapsed one passes, a lease
// that lapses while it watches passes (a killed holder), one renewed by
// its holder meanwhile refuses with ClaimReplica's error.
func TestPrecheckReplica(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	held := store.Lease{Name: "replica/r1", Holder: "other/1/abc", Epoch: 3, Expires: now.Add(10 * time.Second)}
	lapsed := held
	lapsed.Expires = now.Add(-time.Second)
	renewed := held
	renewed.Expires = now.Add(20 * time.Second)
	for _, c := range []struct {
		name    string
		reads   []store.Lease // zero Lease: none found
		refused bool
	}{
		{"none", []store.Lease{{}}, false},
		{"lapsed", []store.Lease{lapsed}, false},
		{"lapses while watched", []store.Lease{held, held, lapsed}, false},
		{"renewed while watched", []store.Lease{held, held, renewed}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			i := 0
			read := func(ctx context.Context, name string) (store.Lease, bool, time.Time, error) {
				if name != "replica/r1" || i >= len(c.reads) {
					t.Fatalf("read %q (read %d of %d)", name, i+1, len(c.reads))
				}
				l := c.reads[i]
				i++
				return l, l.Holder != "", now, nil
			}
			err := PrecheckReplica(t.Context(), "r1", read, slog.New(slog.DiscardHandler))
			var inUse *ReplicaNameInUseError
			if got := errors.As(err, &inUse); got != c.refused || (!c.refused && err != nil) {
				t.Fatalf("PrecheckReplica: %v, want refused %v", err, c.refused)
			}
			if c.refused && (inUse.Name != "r1" || inUse.Instance != held.Holder || !inUse.Until.Equal(renewed.Expires)) {
				t.Errorf("refusal %+v", inUse)
			}
			if i != len(c.reads) {
				t.Errorf("%d reads, want %d", i, len(c.reads))
			}
		})
	}
	if err := PrecheckReplica(t.Context(), "", nil, nil); err != nil {
		t.Errorf("no configured name: %v", err)
	}
}
