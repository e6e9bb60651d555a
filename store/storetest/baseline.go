package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// legacyKey writes k as a release before key administration records did:
// a key record with no audit record.
func legacyKey(t *testing.T, s store.Store, k jwks.KeyRecord) {
	t.Helper()
	if _, err := s.MakeKey(t.Context(), func(context.Context, []jwks.KeyRecord) (jwks.KeyRecord, error) { return k, nil }); err != nil {
		t.Fatal(err)
	}
}

// baselineRecord makes the key.baseline record of k, as cardsignd does.
func baselineRecord(k jwks.KeyRecord) (audit.Record, error) {
	return store.KeyAudit(audit.KindKeyBaseline, k, "cardsignd", "", "", base().Add(2*time.Hour))
}

// keyTrailOf replays every audit record of s.
func keyTrailOf(t *testing.T, s store.Store) *store.KeyTrail {
	t.Helper()
	var trail store.KeyTrail
	for _, r := range listAll(t, s) {
		if err := trail.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	return &trail
}

// testBaselineKeys: keys from before key administration records (a store
// upgraded from an older release) get one key.baseline record each, with
// their whole state, once: handles racing append one baseline, a later
// call appends none, and from the baseline on a legacy key's erased
// revocation is a disagreement with the trail.
func testBaselineKeys(t *testing.T, open Opener) {
	s1, s2 := mustOpen(t, open), mustOpen(t, open)
	ctx := t.Context()
	old := NewKey(t, "k1", base())
	revoked := NewKey(t, "k0", base().Add(-time.Hour))
	at := base().Add(time.Minute)
	revoked.RevokedAt, revoked.RevokeReason = &at, "compromise"
	legacyKey(t, s1, revoked)
	legacyKey(t, s1, old)
	if _, err := s1.AppendAudit(ctx, []audit.Record{newRecord("before", 1)}); err != nil {
		t.Fatal(err)
	}
	if _, legacy := keyTrailOf(t, s1).Check(listKeysOf(t, s1), store.CheckAll); len(legacy) != 2 {
		t.Fatalf("legacy keys before the baseline: %v, want both", legacy)
	}

	const workers = 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	var appended []audit.Record
	for _, s := range []store.Store{s1, s2} {
		for range workers {
			wg.Go(func() {
				out, err := s.BaselineKeys(ctx, baselineRecord)
				if err != nil {
					t.Errorf("BaselineKeys: %v", err)
				}
				mu.Lock()
				appended = append(appended, out...)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	recs := listAll(t, s1)
	if len(appended) != 2 || len(recs) != 3 {
		t.Fatalf("%d handles racing appended %d records, the log holds %d; want one baseline of 2 records", 2*workers, len(appended), len(recs))
	}
	for _, r := range recs[1:] {
		if r.Kind() != audit.KindKeyBaseline || r.Caller != "cardsignd" {
			t.Fatalf("record %d is %s by %q, want key.baseline by cardsignd", r.Seq, r.Kind(), r.Caller)
		}
	}
	st, err := audit.DecodeKeyState(recs[1].Detail)
	if recs[1].KID != "k0" || err != nil || st.RevokedAt == nil || !st.RevokedAt.Equal(at) || st.RevokeReason != "compromise" {
		t.Fatalf("the baseline of the revoked key: %s %+v (%v), want it revoked at %s", recs[1].KID, st, err, at)
	}
	if entries, err := s1.LogEntries(ctx, 0, 3); err != nil || len(entries) != 3 {
		t.Fatalf("the log holds %d entries (%v), want one per record", len(entries), err)
	}
	if problems, legacy := keyTrailOf(t, s1).Check(listKeysOf(t, s1), store.CheckAll); len(problems) != 0 || len(legacy) != 0 {
		t.Fatalf("after the baseline: problems %v, legacy %v; want none", problems, legacy)
	}

	// A later start appends none, even with a key that has no record.
	legacyKey(t, s1, NewKey(t, "k2", base().Add(-2*time.Hour)))
	called := false
	out, err := s2.BaselineKeys(ctx, func(k jwks.KeyRecord) (audit.Record, error) { called = true; return baselineRecord(k) })
	if err != nil || len(out) != 0 || called {
		t.Fatalf("a second baseline: %d records (%v, record made: %v), want none", len(out), err, called)
	}
	problems, legacy := keyTrailOf(t, s1).Check(listKeysOf(t, s1), store.CheckAll)
	if len(problems) != 1 || problems[0].KID != "k2" || len(legacy) != 0 {
		t.Fatalf("a key added (backdated) after the baseline: problems %v, legacy %v; want k2 found", problems, legacy)
	}

	// A legacy key's revocation erased after the baseline (behind the
	// store's back: the store refuses it) disagrees.
	keys := listKeysOf(t, s1)
	for i := range keys {
		if keys[i].KID == "k0" {
			keys[i].RevokedAt, keys[i].RevokeReason = nil, ""
		}
	}
	problems, _ = keyTrailOf(t, s1).Check(keys, store.CheckAll)
	found := false
	for _, p := range problems {
		found = found || (p.KID == "k0" && p.Seq == recs[1].Seq)
	}
	if !found {
		t.Fatalf("the legacy key's revocation erased: problems %v, want k0 against its baseline record", problems)
	}
}

func listKeysOf(t *testing.T, s store.Store) []jwks.KeyRecord {
	t.Helper()
	keys, err := s.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
