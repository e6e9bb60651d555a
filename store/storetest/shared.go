package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// The contract of what several replicas share: keys made under the key-set
// lock, the store's clock, leases and fenced documents.

func testMakeKey(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	first := NewKey(t, "k1", base())
	got, err := s.MakeKey(ctx, func(_ context.Context, existing []jwks.KeyRecord) (jwks.KeyRecord, error) {
		if len(existing) != 0 {
			t.Errorf("make saw %d records in an empty store", len(existing))
		}
		return first, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !equalKeys(got, first) {
		t.Fatalf("MakeKey returned %s, want %s", fmtKey(got), fmtKey(first))
	}
	refusal := errors.New("a rotation is already scheduled")
	calls := 0
	_, err = s.MakeKey(ctx, func(_ context.Context, existing []jwks.KeyRecord) (jwks.KeyRecord, error) {
		calls++
		if len(existing) != 1 || existing[0].KID != "k1" {
			t.Errorf("make saw %d records, want [k1]", len(existing))
		}
		return jwks.KeyRecord{}, refusal
	})
	if err != refusal {
		t.Fatalf("MakeKey returned %v, want make's error as is", err)
	}
	if calls != 1 {
		t.Fatalf("make called %d times, want 1", calls)
	}
	// A made record whose kid is taken is refused like CreateKey's.
	if _, err := s.MakeKey(ctx, func(context.Context, []jwks.KeyRecord) (jwks.KeyRecord, error) {
		return NewKey(t, "k1", base().Add(time.Hour)), nil
	}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("MakeKey with a taken kid: %v, want ErrExists", err)
	}
	// An invalid record writes nothing.
	bad := NewKey(t, "k2", base())
	bad.URI = ""
	if _, err := s.MakeKey(ctx, func(context.Context, []jwks.KeyRecord) (jwks.KeyRecord, error) { return bad, nil }); err == nil {
		t.Fatal("MakeKey stored a record with an empty URI")
	}
	checkKeys(t, s, []jwks.KeyRecord{first})
}

// testMakeKeyRace is "keys rotate sent to every replica at once": each
// handle's make refuses when a key exists, so exactly one make may get past
// its check. A store that ran make outside the key-set lock would let
// several through, each of which would have made a key at a KMS.
func testMakeKeyRace(t *testing.T, open Opener) {
	const handles, each = 3, 4
	var made atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, handles*each)
	for h := range handles {
		s := mustOpen(t, open)
		for i := range each {
			wg.Go(func() {
				_, err := s.MakeKey(t.Context(), func(_ context.Context, existing []jwks.KeyRecord) (jwks.KeyRecord, error) {
					if len(existing) > 0 {
						return jwks.KeyRecord{}, errRaceLost
					}
					made.Add(1)
					// Give a racing make the time to get in, if the lock
					// let it.
					time.Sleep(20 * time.Millisecond)
					return NewKey(t, fmt.Sprintf("k-%d-%d", h, i), base()), nil
				})
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, errRaceLost):
		default:
			t.Errorf("MakeKey: %v", err)
		}
	}
	if won != 1 || made.Load() != 1 {
		t.Fatalf("%d MakeKey calls won and %d makes ran, want exactly 1 and 1", won, made.Load())
	}
	keys, err := mustOpen(t, open).ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Fatalf("%d keys stored, want 1", len(keys))
	}
}

var errRaceLost = errors.New("race lost")

func testNow(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	before := time.Now()
	now, err := s.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The store's clock is another host's for a database server; the test
	// runs beside it, so the two agree to well within a minute.
	if d := now.Sub(before); d < -time.Minute || d > time.Minute {
		t.Fatalf("store clock %s is %s from this process's", now, d)
	}
	later, err := s.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if later.Before(now) {
		t.Fatalf("store clock went back: %s then %s", now, later)
	}
}

func testLeases(t *testing.T, open Opener) {
	s1, s2 := mustOpen(t, open), mustOpen(t, open)
	ctx := t.Context()
	// Long enough never to lapse while the test runs on a loaded machine;
	// expiry is tested with a lease renewed to a short TTL and waited out.
	const ttl = time.Minute
	const short = 200 * time.Millisecond
	a, err := s1.AcquireLease(ctx, "duties", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "duties" || a.Holder != "a" || a.Epoch != 1 {
		t.Fatalf("first lease %+v, want duties held by a at epoch 1", a)
	}
	now, err := s1.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := a.Expires.Sub(now); d <= 0 || d > ttl {
		t.Fatalf("lease expires %s after the store's now, want within (0, %s]", d, ttl)
	}
	held, err := s2.AcquireLease(ctx, "duties", "b", ttl)
	if !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("second holder: %v, want ErrLeaseHeld", err)
	}
	if held.Holder != "a" || held.Epoch != 1 {
		t.Fatalf("ErrLeaseHeld came with %+v, want the holder's lease", held)
	}
	// Another name is another lease.
	if other, err := s2.AcquireLease(ctx, "other", "b", ttl); err != nil || other.Epoch != 1 {
		t.Fatalf("another lease name: %+v, %v", other, err)
	}
	renewed, err := s1.AcquireLease(ctx, "duties", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if renewed.Epoch != 1 || renewed.Expires.Before(a.Expires) {
		t.Fatalf("renewal %+v, want epoch 1 and a later expiry than %s", renewed, a.Expires)
	}
	// Another holder's refusal shows the renewal (same holder and epoch, a
	// later expiry): how a process started under a replica name tells a
	// live holder, which renews, from a killed one (server.ClaimReplica).
	longer, err := s1.AcquireLease(ctx, "duties", "a", 2*ttl)
	if err != nil {
		t.Fatal(err)
	}
	seen, err := s2.AcquireLease(ctx, "duties", "b", ttl)
	if !errors.Is(err, store.ErrLeaseHeld) || seen.Holder != "a" || seen.Epoch != 1 ||
		!seen.Expires.After(renewed.Expires) || seen.Expires.Before(longer.Expires.Add(-time.Millisecond)) {
		t.Fatalf("refused after a renewal to %s: %+v, %v; want a's lease at epoch 1 with the renewed expiry", longer.Expires, seen, err)
	}

	// Release: the holder's frees it at once; b takes it at the next epoch.
	if err := s1.ReleaseLease(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	b, err := s2.AcquireLease(ctx, "duties", "b", ttl)
	if err != nil {
		t.Fatalf("taking a released lease: %v", err)
	}
	if b.Holder != "b" || b.Epoch != 2 {
		t.Fatalf("taken lease %+v, want b at epoch 2", b)
	}
	// A stale release (a's, epoch 1) does nothing.
	if err := s1.ReleaseLease(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.AcquireLease(ctx, "duties", "a", ttl); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("after a stale release: %v, want the lease still held by b", err)
	}

	// Expiry on the store's clock: b renews to a short TTL and stops; past
	// it, a takes the lease at the next epoch and b's fenced writes fail.
	bShort, err := s2.AcquireLease(ctx, "duties", "b", short)
	if err != nil || bShort.Epoch != 2 {
		t.Fatalf("renewal to a short TTL: %+v, %v", bShort, err)
	}
	waitPast(t, s1, bShort.Expires)
	a3, err := s1.AcquireLease(ctx, "duties", "a", short)
	if err != nil {
		t.Fatalf("taking an expired lease: %v", err)
	}
	if a3.Holder != "a" || a3.Epoch != 3 {
		t.Fatalf("expired lease taken as %+v, want a at epoch 3", a3)
	}
	if err := s2.PutDocument(ctx, bShort, store.Document{Name: "d", Seq: 1, Body: []byte("x")}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("write fenced by the expired holder's epoch: %v, want ErrLeaseLost", err)
	}
	// A holder whose own lease expired gets it back at a new epoch: writes
	// fenced by the old epoch stay refused.
	waitPast(t, s1, a3.Expires)
	a4, err := s1.AcquireLease(ctx, "duties", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if a4.Epoch != 4 {
		t.Fatalf("expired lease re-taken by its holder at epoch %d, want 4", a4.Epoch)
	}
	if err := s1.PutDocument(ctx, a3, store.Document{Name: "d", Seq: 1, Body: []byte("x")}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("write fenced by an expired epoch: %v, want ErrLeaseLost", err)
	}
	if err := s1.PutDocument(ctx, a4, store.Document{Name: "d", Seq: 1, Body: []byte("x")}); err != nil {
		t.Fatalf("write fenced by the current epoch: %v", err)
	}
}

// waitPast waits until the store's clock is past t.
func waitPast(t *testing.T, s store.Store, at time.Time) {
	t.Helper()
	for {
		now, err := s.Now(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if now.After(at) {
			return
		}
		time.Sleep(at.Sub(now) + 10*time.Millisecond)
	}
}

// testLeaseRace: many handles asking for a free lease at once; exactly one
// gets it.
func testLeaseRace(t *testing.T, open Opener) {
	const handles, each = 3, 4
	var wg sync.WaitGroup
	type result struct {
		l   store.Lease
		err error
	}
	results := make(chan result, handles*each)
	for h := range handles {
		s := mustOpen(t, open)
		for i := range each {
			wg.Go(func() {
				l, err := s.AcquireLease(t.Context(), "duties", fmt.Sprintf("h%d-%d", h, i), time.Minute)
				results <- result{l, err}
			})
		}
	}
	wg.Wait()
	close(results)
	var winners []string
	for r := range results {
		switch {
		case r.err == nil:
			winners = append(winners, r.l.Holder)
		case errors.Is(r.err, store.ErrLeaseHeld):
		default:
			t.Errorf("AcquireLease: %v", r.err)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("lease granted to %v, want exactly one holder", winners)
	}
}

func testDocuments(t *testing.T, open Opener) {
	s1, s2 := mustOpen(t, open), mustOpen(t, open)
	ctx := t.Context()
	if _, err := s1.Document(ctx, "revocations"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing document: %v, want ErrNotFound", err)
	}
	l, err := s1.AcquireLease(ctx, "duties", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte{0, 1, 2, 0xff, '{', '}'} // bytes, not text
	doc := store.Document{Name: "revocations", Seq: 5, Body: body, Meta: []byte(`{"set":"k1"}`)}
	if err := s1.PutDocument(ctx, l, doc); err != nil {
		t.Fatal(err)
	}
	got, err := s2.Document(ctx, "revocations")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != doc.Name || got.Seq != 5 || !bytes.Equal(got.Body, body) || !bytes.Equal(got.Meta, doc.Meta) || got.UpdatedAt.IsZero() {
		t.Fatalf("document read back as %+v, want %+v with UpdatedAt set", got, doc)
	}
	for _, seq := range []int64{5, 4} {
		stale := doc
		stale.Seq, stale.Body = seq, []byte("stale")
		if err := s1.PutDocument(ctx, l, stale); !errors.Is(err, store.ErrStaleDocument) {
			t.Fatalf("seq %d over seq 5: %v, want ErrStaleDocument", seq, err)
		}
	}
	// Fencing: a lease not held as given (another holder's name, a wrong
	// epoch, a lease never taken) writes nothing.
	for _, fence := range []store.Lease{
		{Name: "duties", Holder: "b", Epoch: l.Epoch},
		{Name: "duties", Holder: "a", Epoch: l.Epoch + 1},
		{Name: "never-taken", Holder: "a", Epoch: 1},
	} {
		next := doc
		next.Seq, next.Body = 6, []byte("fenced out")
		if err := s2.PutDocument(ctx, fence, next); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("PutDocument fenced by %+v: %v, want ErrLeaseLost", fence, err)
		}
	}
	next := doc
	next.Seq, next.Body, next.Meta = 6, []byte("six"), nil
	if err := s2.PutDocument(ctx, l, next); err != nil {
		t.Fatalf("the holder's lease fences writes from any handle: %v", err)
	}
	got, err = s1.Document(ctx, "revocations")
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != 6 || string(got.Body) != "six" || len(got.Meta) != 0 {
		t.Fatalf("document after replacement: %+v", got)
	}
	// Documents are independent by name.
	if err := s1.PutDocument(ctx, l, store.Document{Name: "other", Seq: 1, Body: []byte("o")}); err != nil {
		t.Fatal(err)
	}
}

// testCounters: a store that lets its counters be read and raised (for
// copying it) keeps NextSequence consistent with them.
func testCounters(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	c, ok := s.(store.Counters)
	if !ok {
		t.Fatalf("%T does not implement store.Counters", s)
	}
	ctx := t.Context()
	if v, err := c.Counter(ctx, "docs"); err != nil || v != 0 {
		t.Fatalf("unused counter: %d, %v", v, err)
	}
	if _, err := s.NextSequence(ctx, "docs"); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Counter(ctx, "docs"); err != nil || v != 1 {
		t.Fatalf("counter after one NextSequence: %d, %v", v, err)
	}
	for _, raise := range []int64{40, 7} { // raising to less does nothing
		if err := c.RaiseCounter(ctx, "docs", raise); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := s.NextSequence(ctx, "docs"); err != nil || v != 41 {
		t.Fatalf("NextSequence after raising to 40: %d, %v", v, err)
	}
	if err := c.RaiseCounter(ctx, "fresh", 5); err != nil {
		t.Fatal(err)
	}
	if v, err := s.NextSequence(ctx, "fresh"); err != nil || v != 6 {
		t.Fatalf("NextSequence of a counter raised before its first use: %d, %v", v, err)
	}
}
