package server

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlite"
)

// replicaOf opens a second authority on a's store file, as another replica
// would (its own handle, its own caches, its own duties lease holder).
func replicaOf(t *testing.T, dir, name string, skew time.Duration) *Authority {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "cardsign.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := NewAuthority(Config{
		KeyBackend: "file", KeyDir: filepath.Join(dir, "keys"), DefaultAlg: jose.ES256,
		Prepublish: time.Hour, RetireGrace: 24 * time.Hour,
		JWKSMaxAge: time.Hour, RevocationTTL: time.Hour, AuditBatch: 64,
		Replica: name, ClockSkew: skew,
	}, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { a.Close() })
	if created, err := a.Bootstrap(t.Context()); err != nil || created {
		t.Fatalf("Bootstrap of a replica on a store with keys: created %v, %v", created, err)
	}
	return a
}

// TestRevocationDocumentSignedOnceServedByAll: the lease holder signs the
// revocation document; another replica serves the same bytes and does not
// sign one of its own, even after a revocation it made itself; once the
// holder lets the lease go, the other replica takes over at the next epoch.
func TestRevocationDocumentSignedOnceServedByAll(t *testing.T) {
	ctx := t.Context()
	a, dir := newAuthority(t)
	b := replicaOf(t, dir, "b", 0)
	docA, rA := verifiedRevocations(t, a)
	docB, _ := verifiedRevocations(t, b)
	if !bytes.Equal(docA, docB) {
		t.Fatal("two replicas serve different revocation documents")
	}
	if _, ok, _ := b.duties.held(ctx); ok {
		t.Fatal("both replicas hold the duties lease")
	}

	// b revokes a key; a (the holder) re-signs at its next round, told of
	// the change; until then b serves the stored document, still valid.
	pending, err := b.RotateKey(ctx, "", durationPtr(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.RevokeKey(ctx, pending.KID, "keyCompromise", false); err != nil {
		t.Fatal(err)
	}
	if doc, _ := verifiedRevocations(t, b); !bytes.Equal(doc, docA) {
		t.Fatal("a replica without the lease signed a revocation document")
	}
	a.changed(store.TopicKeys) // what a store.Watcher delivers
	if err := a.dutyRound(ctx); err != nil {
		t.Fatal(err)
	}
	b.changed(store.TopicDocuments)
	docB2, rB2 := verifiedRevocations(t, b)
	docA2, _ := verifiedRevocations(t, a)
	if !bytes.Equal(docA2, docB2) || rB2.Sequence <= rA.Sequence || len(rB2.Revoked) != 1 || rB2.Revoked[0].KID != pending.KID {
		t.Fatalf("after the revocation: same bytes %v, %+v", bytes.Equal(docA2, docB2), rB2)
	}

	// Handover: a releases the lease (a graceful stop); b takes it at the
	// next epoch, and a's writes under the old epoch are fenced off.
	old, ok, err := a.duties.held(ctx)
	if err != nil || !ok {
		t.Fatalf("a lost the lease: %v", err)
	}
	a.duties.release(ctx)
	if err := b.dutyRound(ctx); err != nil {
		t.Fatal(err)
	}
	l, ok, err := b.duties.held(ctx)
	if err != nil || !ok || l.Epoch != old.Epoch+1 {
		t.Fatalf("b after a's release: held %v at epoch %d (a had %d), %v", ok, l.Epoch, old.Epoch, err)
	}
	if err := a.store.PutDocument(ctx, old, store.Document{Name: revocationsDoc, Seq: rB2.Sequence + 100, Body: []byte("stale")}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a write fenced by the released lease: %v", err)
	}
	if _, ok, _ := a.duties.held(ctx); ok {
		t.Fatal("a got the lease back while b holds it")
	}
}

// TestClockSkewUsesStoreClock: a replica whose host clock is 30 s ahead
// takes its times from the store's clock: a key it rotates activates when
// the others expect, and it derives the same key states.
func TestClockSkewUsesStoreClock(t *testing.T) {
	ctx := t.Context()
	a, dir := newAuthority(t)
	fast := replicaOf(t, dir, "fast", 30*time.Second)
	if d := fast.now().Sub(a.now()); d < -2*time.Second || d > 2*time.Second {
		t.Fatalf("skewed replica's clock is %s from the store's", d)
	}
	v, err := fast.RotateKey(ctx, "", durationPtr(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if d := v.ActivateAt.Sub(a.now().Add(10 * time.Second)); d < -2*time.Second || d > 2*time.Second {
		t.Fatalf("activation set %s off by a replica 30 s ahead", d)
	}
	// Neither replica thinks the rotated key is active yet.
	for name, r := range map[string]*Authority{"a": a, "fast": fast} {
		views, err := r.Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if act, _ := jwks.Active(views); act.KID == v.KID {
			t.Fatalf("replica %s already signs with a key that activates in 10 s", name)
		}
	}
}
