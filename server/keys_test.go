package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/storetest"
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

// TestKeyAdministrationAudited: every key administration (the first key
// included) is an audit record of its kind naming its caller, chained and
// a transparency-log leaf, committed with the key change; its log line
// names the caller; and the key records agree with the trail.
func TestKeyAdministrationAudited(t *testing.T) {
	var logs testsupport.SyncBuffer
	a, dir := newAuthorityLogged(t, slog.New(slog.NewTextHandler(&logs, nil)))
	first := activeKID(t, a)

	const who = "token:alice"
	ctx := WithCall(t.Context(), Call{Caller: who, RequestID: "req-1"})
	created, err := a.admin.CreateKey(ctx, "ES384")
	if err != nil {
		t.Fatal(err)
	}
	imported, err := a.admin.ImportKey(ctx, "file:"+writeKeyFile(t, filepath.Join(dir, "keys")), "", "")
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := a.admin.RotateKey(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.ActivateKey(ctx, rotated.KID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.RetireKey(ctx, created.KID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.RevokeKey(ctx, imported.KID, "key file leaked", false); err != nil {
		t.Fatal(err)
	}

	recs := chainedAudit(t, a.store)
	want := []struct {
		kind   audit.Kind
		kid    string
		caller string
		reason string
	}{
		{audit.KindKeyCreate, first, SystemCaller, ""},
		{audit.KindKeyCreate, created.KID, who, ""},
		{audit.KindKeyImport, imported.KID, who, ""},
		{audit.KindKeyRotate, rotated.KID, who, ""},
		{audit.KindKeyActivate, rotated.KID, who, ""},
		{audit.KindKeyRetire, created.KID, who, ""},
		{audit.KindKeyRevoke, imported.KID, who, "unspecified: key file leaked"},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d audit records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, w := range want {
		r := recs[i]
		if r.Kind() != w.kind || r.KID != w.kid || r.Caller != w.caller || r.Reason != w.reason {
			t.Errorf("record %d: %s %s by %q (reason %q), want %s %s by %q (reason %q)", r.Seq, r.Kind(), r.KID, r.Caller, r.Reason, w.kind, w.kid, w.caller, w.reason)
		}
	}
	storetest.CheckKeyTrail(t, a.store, recs)
	for _, msg := range []string{"key created", "key imported", "key rotation scheduled", "key activated", "key retired", "key revoked"} {
		found := false
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "msg=\""+msg+"\"") {
				found = true
				if !strings.Contains(line, "caller="+who) {
					t.Errorf("log line %q does not name the caller", line)
				}
			}
		}
		if !found {
			t.Errorf("no %q log line in:\n%s", msg, logs.String())
		}
	}
}

// TestRegistryAdministrationAudited: removing an agent and revoking a card
// are audit records naming the caller, the agent and the card, chained
// like signatures.
func TestRegistryAdministrationAudited(t *testing.T) {
	a, _ := newAuthority(t)
	ctx := WithCall(t.Context(), Call{RequestID: "req-9"})
	registerAgents(t, a, "payments", "billing")
	payments, err := a.registry.Card(ctx, "payments", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Agents().RevokeAgentCard(ctx, "payments", 0, "leaked", "token:admin"); err != nil {
		t.Fatal(err)
	}
	if err := a.registry.Remove(ctx, "billing", "token:root"); err != nil {
		t.Fatal(err)
	}
	recs := chainedAudit(t, a.store)
	rev, rm := recs[len(recs)-2], recs[len(recs)-1]
	if d, err := audit.DecodeAgentDetail(rev.Detail); rev.Kind() != audit.KindCardRevoke || rev.Caller != "token:admin" || rev.Reason != "unspecified: leaked" ||
		rev.RequestID != "req-9" || !bytes.Equal(rev.CanonicalSHA256, payments.CanonicalSHA256) || err != nil || d != (audit.AgentDetail{Agent: "payments", Version: 1}) {
		t.Errorf("card revocation record: %+v", rev)
	}
	if d, err := audit.DecodeAgentDetail(rm.Detail); rm.Kind() != audit.KindAgentRemove || rm.Caller != "token:root" || err != nil || d.Agent != "billing" {
		t.Errorf("agent removal record: %+v", rm)
	}
}

// writeKeyFile writes a new P-256 private key into dir, as an operator would
// before importing it.
func writeKeyFile(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "import-*.pem")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(testsupport.NewKeyPEM(t)); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// chainedAudit reads st's whole audit log and checks that it is one chain
// from the genesis.
func chainedAudit(t *testing.T, st store.AuditLog) []audit.Record {
	t.Helper()
	recs, err := st.ListAudit(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.VerifyChain(audit.Genesis(), recs); err != nil {
		t.Fatal(err)
	}
	return recs
}
