package registry

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/store"
)

// TestResign: a pass signs again exactly the live cards whose signatures
// are not by the signing keys (a revoked card never), each as its agent's
// next version, with a request id that says why; a pass that left nothing
// to do is not repeated for the same keys; a card that fails keeps its
// keys held and is retried.
func TestResign(t *testing.T) {
	tr := newTestRegistry(t, nil)
	ctx := t.Context()
	for _, id := range []string{"alpha", "beta", "gamma"} {
		if _, err := tr.register(t, id, store.Public, "token:a", "k1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Resign(ctx); err != nil || len(tr.signer.done) != 0 {
		t.Fatalf("nothing to do: %v, %d signed", err, len(tr.signer.done))
	}
	if _, err := tr.Revoke(ctx, "gamma", 0, "bad", "token:admin"); err != nil {
		t.Fatal(err)
	}
	tr.keys.signing = []string{"k1", "k2"} // k2 pending
	tr.signer.fail["beta"] = errors.New("backend down")
	err := tr.Resign(ctx)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 cards not re-signed") {
		t.Fatalf("a pass with beta failing: %v", err)
	}
	if !tr.keys.held["k1"] {
		t.Errorf("held keys %v, want k1 (beta still carries it)", tr.keys.held)
	}
	var ids []string
	for _, rs := range tr.signer.done {
		ids = append(ids, rs.RequestID)
	}
	slices.Sort(ids)
	if want := []string{"resign.alpha.v1.add.k2", "resign.beta.v1.add.k2"}; !slices.Equal(ids, want) {
		t.Fatalf("re-signatures %v, want %v (gamma is revoked)", ids, want)
	}
	if c, _ := tr.Card(ctx, "alpha", 0); c.Version != 2 || !slices.Equal(c.KIDs, []string{"k1", "k2"}) || c.Caller != ResignCaller {
		t.Fatalf("alpha after the pass: v%d %v by %s", c.Version, c.KIDs, c.Caller)
	}
	if tr.outcomes["resigned"] != 1 || tr.outcomes["failed"] != 1 {
		t.Errorf("outcomes %v", tr.outcomes)
	}
	delete(tr.signer.fail, "beta")
	tr.signer.done = nil
	if err := tr.Resign(ctx); err != nil || len(tr.signer.done) != 1 || tr.signer.done[0].RequestID != "resign.beta.v1.add.k2" {
		t.Fatalf("the retry: %v, %+v; want beta signed again", err, tr.signer.done)
	}
	tr.signer.done = nil
	tr.signer.fail["alpha"] = errors.New("would sign again")
	if err := tr.Resign(ctx); err != nil || len(tr.signer.done) != 0 {
		t.Fatalf("a pass after one that left nothing to do: %v, %d signed", err, len(tr.signer.done))
	}
}

// TestResignCoalesces: a rotation (k2 pending) followed, in the middle of
// the pass it started, by the activation of k2 and the revocation of k1:
// the pass retargets, and one Resign ends with every card carrying k2 alone
// (counted in the store), each card signed for k2 alone exactly once, and
// none signed by k1 after its revocation.
func TestResignCoalesces(t *testing.T) {
	tests := []struct {
		name     string
		switchAt int // the re-signature before which k1 is revoked; 0: before the pass
	}{
		{"revoked before the pass", 0},
		{"revoked mid-pass", 25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTestRegistry(t, func(c *Config) { c.ResignConcurrency = 4 })
			ctx := t.Context()
			const cards = 60
			var ids []string
			for i := range cards {
				id := fmt.Sprintf("agent-%02d", i)
				ids = append(ids, id)
				if _, err := tr.register(t, id, store.Public, "token:a", "k1"); err != nil {
					t.Fatal(err)
				}
			}
			revoke := func() {
				tr.keys.mu.Lock()
				tr.keys.signing, tr.keys.revoked = []string{"k2"}, []string{"k1"}
				tr.keys.mu.Unlock()
			}
			tr.keys.signing = []string{"k1", "k2"} // the rotation
			if tt.switchAt == 0 {
				revoke()
			} else {
				tr.signer.before = func(n int) {
					if n == tt.switchAt {
						revoke()
					}
				}
			}
			if err := tr.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			onlyK2 := 0
			for after := ""; ; {
				page, err := tr.List(ctx, after, 50)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range page {
					after = c.ID
					if slices.Equal(c.KIDs, []string{"k2"}) {
						onlyK2++
					}
				}
				if len(page) < 50 {
					break
				}
			}
			if onlyK2 != cards {
				t.Fatalf("%d of %d cards carry k2 alone after one Resign", onlyK2, cards)
			}
			for _, id := range ids {
				var forK2 int
				for _, kids := range tr.signer.signedBy[id] {
					if slices.Equal(kids, []string{"k2"}) {
						forK2++
					}
				}
				if forK2 != 1 {
					t.Errorf("agent %s signed for k2 alone %d times (%v), want once", id, forK2, tr.signer.signedBy[id])
				}
			}
			if tt.switchAt == 0 && len(tr.signer.done) != cards {
				t.Errorf("%d re-signatures for %d cards, the keys settled before the pass", len(tr.signer.done), cards)
			}
		})
	}
}

// TestResignRefreshes: with a lifetime, a card is signed again once
// RefreshAt of it has passed, with the same keys.
func TestResignRefreshes(t *testing.T) {
	tr := newTestRegistry(t, func(c *Config) { c.Lifetime, c.RefreshAt = time.Hour, 0.5 })
	ctx := t.Context()
	if _, err := tr.register(t, "alpha", store.Public, "token:a", "k1"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Resign(ctx); err != nil || len(tr.signer.done) != 0 {
		t.Fatalf("a fresh card: %v, %d signed", err, len(tr.signer.done))
	}
	tr.later(31 * time.Minute)
	tr.resign.st = resignState{} // as after a minute: a full pass
	if err := tr.Resign(ctx); err != nil || len(tr.signer.done) != 1 || tr.signer.done[0].RequestID != "resign.alpha.v1.refresh" {
		t.Fatalf("a card past half its lifetime: %v, %+v", err, tr.signer.done)
	}
}

// TestResignature: a re-signature repeats the stored options and replaces
// the version it starts from; its request id names the keys added and
// dropped, within the bounds of a request id.
func TestResignature(t *testing.T) {
	c := store.AgentCard{ID: "pay", Version: 3, Visibility: store.Public, Input: []byte(`{}`), KIDs: []string{"k1", "k2"},
		Options: []byte(`{"strip_unknown":true,"profile":"sdk","keep_signatures":true}`)}
	rs, err := NewResignature(c, []string{"k2", "k3"})
	if err != nil {
		t.Fatal(err)
	}
	if rs.Options != (Options{StripUnknown: true, Profile: "sdk", KeepSignatures: true}) || rs.Registration.replaces != 3 || !rs.Registration.resign {
		t.Fatalf("resignature %+v %+v", rs, rs.Registration)
	}
	if rs.RequestID != "resign.pay.v3.add.k3.drop.k1" {
		t.Fatalf("request id %q", rs.RequestID)
	}
	c.Options = []byte(`{`)
	if _, err := NewResignature(c, nil); err == nil {
		t.Fatal("bad stored options accepted")
	}
	c.Options, c.ID = nil, strings.Repeat("a", 128)
	if rs, err := NewResignature(c, []string{"k/1"}); err != nil || len(rs.RequestID) != 128 || strings.ContainsAny(rs.RequestID, "/") {
		t.Fatalf("long request id %q, %v", rs.RequestID, err)
	}
}

// TestResignSlices: a pass longer than its slice stops admitting cards when
// the slice ends (at least one card per call, so every call makes
// progress), answers ErrResignUnfinished, and the next call goes on where
// it stopped: every card is signed once, and the call that finishes the
// pass answers nil.
func TestResignSlices(t *testing.T) {
	tr := newTestRegistry(t, func(c *Config) { c.ResignSlice, c.ResignConcurrency = time.Nanosecond, 1 })
	ctx := t.Context()
	ids := []string{"alpha", "beta", "delta", "epsilon", "gamma"}
	for _, id := range ids {
		if _, err := tr.register(t, id, store.Public, "token:a", "k1"); err != nil {
			t.Fatal(err)
		}
	}
	tr.keys.signing = []string{"k2"}
	calls := 0
	for {
		calls++
		before := len(tr.signer.done)
		err := tr.Resign(ctx)
		if got := len(tr.signer.done) - before; got != 1 {
			t.Fatalf("call %d signed %d cards, want 1 (one per slice of 1ns)", calls, got)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, ErrResignUnfinished) || calls >= len(ids) {
			t.Fatalf("call %d: %v", calls, err)
		}
	}
	if calls != len(ids) {
		t.Fatalf("%d calls, want %d", calls, len(ids))
	}
	for _, id := range ids {
		if c, _ := tr.Card(ctx, id, 0); !slices.Equal(c.KIDs, []string{"k2"}) || c.Version != 2 {
			t.Errorf("%s: v%d %v, want v2 signed by k2 alone", id, c.Version, c.KIDs)
		}
	}
}
