package server

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// forget drops the opened keys, as a restart would.
func (k *keyring) forget() {
	k.mu.Lock()
	clear(k.signers)
	k.mu.Unlock()
}

// countingStore counts key-record reads and can hold one until released.
type countingStore struct {
	store.Store
	reads atomic.Int32                  // reads done (counted before any hold)
	hold  atomic.Pointer[chan struct{}] // when set, the next read waits for it before returning
}

func (s *countingStore) ListKeys(ctx context.Context) ([]jwks.KeyRecord, error) {
	h := s.hold.Swap(nil)
	recs, err := s.Store.ListKeys(ctx)
	s.reads.Add(1)
	if h != nil {
		<-*h
	}
	return recs, err
}

// TestKeyringRecordsCache: records are read once per refresh period, again
// when forced, and a slow read does not put back records older than a
// newer read's.
func TestKeyringRecordsCache(t *testing.T) {
	ctx := context.Background()
	a, _ := newAuthority(t)
	st := &countingStore{Store: a.store}
	k := newKeyring(st, a.cfg.Backends, time.Hour, a.keys.policy, newBackendLimits(nil, a.metrics.backendSign))
	for range 3 {
		if recs, err := k.records(ctx, false); err != nil || len(recs) != 1 {
			t.Fatalf("records: %d %v", len(recs), err)
		}
	}
	if n := st.reads.Load(); n != 1 {
		t.Fatalf("%d reads within the refresh period, want 1", n)
	}
	if _, err := k.records(ctx, true); err != nil || st.reads.Load() != 2 {
		t.Fatalf("a forced read: %v, %d reads", err, st.reads.Load())
	}

	// A slow read starts, a key is created and a forced read sees it; the
	// slow read ends last and must not hide the new key.
	release := make(chan struct{})
	st.hold.Store(&release)
	slow := make(chan error)
	go func() {
		_, err := k.records(ctx, true)
		slow <- err
	}()
	for st.reads.Load() != 3 {
		time.Sleep(time.Millisecond)
	}
	if _, err := a.admin.CreateKey(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if recs, err := k.records(ctx, true); err != nil || len(recs) != 2 {
		t.Fatalf("forced read after CreateKey: %d %v", len(recs), err)
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	if recs, _ := k.records(ctx, false); len(recs) != 2 {
		t.Fatalf("a slow, older read put back %d records", len(recs))
	}
}

// TestKeyringOpensOnce: a key is opened once, behind its backend's limit,
// and its public key decoded once.
func TestKeyringOpensOnce(t *testing.T) {
	ctx := context.Background()
	a, _ := newAuthority(t)
	v := activeView(t, a)
	if got := a.keys.backendOf(v.KID); got != noLabel {
		t.Fatalf("backend of a key not opened yet: %q", got)
	}
	first, err := a.keys.open(ctx, v.KeyRecord)
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.keys.open(ctx, v.KeyRecord)
	if err != nil || again != first {
		t.Fatalf("second open: %v, same key %v", err, again == first)
	}
	if _, ok := first.key.Signer.(*limitedSigner); !ok {
		t.Fatalf("opened signer %T is not limited", first.key.Signer)
	}
	if got := a.keys.backendOf(v.KID); got != "file" {
		t.Fatalf("backend of an opened file key: %q", got)
	}
	pub, err := a.keys.public(v.KeyRecord)
	if err != nil {
		t.Fatal(err)
	}
	bad := v.KeyRecord
	bad.Public.X = "" // the decoded key is kept: the record is not decoded again
	if again, err := a.keys.public(bad); err != nil || !again.(*ecdsa.PublicKey).Equal(pub) {
		t.Fatalf("public key decoded again: %v", err)
	}
}

// TestKeyringWithoutKeys: no active key stops signing, and with nothing
// published there is no key for documents either.
func TestKeyringWithoutKeys(t *testing.T) {
	ctx := context.Background()
	a, _ := newAuthority(t)
	kid := activeKID(t, a)
	if _, err := a.admin.RevokeKey(ctx, kid, "superseded", true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.keys.signing(ctx, a.now()); !errors.Is(err, ErrNoActiveKey) {
		t.Fatalf("signing keys with the only key revoked: %v", err)
	}
	if _, err := documentSignerView(nil); !errors.Is(err, ErrNoActiveKey) {
		t.Fatalf("document signer with nothing published: %v", err)
	}
}
