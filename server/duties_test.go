package server

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/server/revocations"
	"github.com/cardsign/cardsign/store"
)

// replicaOf opens a second authority on a's store file, as another replica
// would (its own handle, its own caches, its own duties lease holder).
func replicaOf(t *testing.T, dir, name string, skew time.Duration) *Authority {
	t.Helper()
	st := openStore(t, dir)
	a := NewAuthority(Config{
		KeyBackend: "file", KeyDir: filepath.Join(dir, "keys"), DefaultAlg: jose.ES256,
		Prepublish: time.Hour, RetireGrace: 24 * time.Hour,
		JWKSMaxAge: time.Hour, RevocationTTL: time.Hour, AuditBatch: 64,
		Replica: name, ClockSkew: skew,
	}, st, slog.New(slog.DiscardHandler))
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
	pending, err := b.admin.RotateKey(ctx, "", durationPtr(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.RevokeKey(ctx, pending.KID, "keyCompromise", false); err != nil {
		t.Fatal(err)
	}
	if doc, _ := verifiedRevocations(t, b); !bytes.Equal(doc, docA) {
		t.Fatal("a replica without the lease signed a revocation document")
	}
	a.changed(store.TopicKeys) // what a store.Watcher delivers
	runDuties(t, a)
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
	if err := a.store.PutDocument(ctx, old, store.Document{Name: revocations.DocumentName, Seq: rB2.Sequence + 100, Body: []byte("stale")}); !errors.Is(err, store.ErrLeaseLost) {
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
	v, err := fast.admin.RotateKey(ctx, "", durationPtr(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if d := v.ActivateAt.Sub(a.now().Add(10 * time.Second)); d < -2*time.Second || d > 2*time.Second {
		t.Fatalf("activation set %s off by a replica 30 s ahead", d)
	}
	// Neither replica thinks the rotated key is active yet.
	for name, r := range map[string]*Authority{"a": a, "fast": fast} {
		views, err := r.admin.Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if act, _ := jwks.Active(views); act.KID == v.KID {
			t.Fatalf("replica %s already signs with a key that activates in 10 s", name)
		}
	}
}

// TestRevocationDocumentSignedOncePerChange: after one revocation, twenty
// fetches at once cost one signature: the sequence moves by one, and every
// fetch gets the same bytes.
func TestRevocationDocumentSignedOncePerChange(t *testing.T) {
	ctx := t.Context()
	a, _ := newAuthority(t)
	_, before := verifiedRevocations(t, a)
	pending, err := a.admin.RotateKey(ctx, "", durationPtr(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.RevokeKey(ctx, pending.KID, "superseded", false); err != nil {
		t.Fatal(err)
	}
	docs := make([][]byte, 20)
	var wg sync.WaitGroup
	for i := range docs {
		wg.Go(func() {
			doc, err := a.docs.Revocations(ctx)
			if err != nil {
				t.Error(err)
			}
			docs[i] = doc
		})
	}
	wg.Wait()
	for _, d := range docs[1:] {
		if !bytes.Equal(d, docs[0]) {
			t.Fatal("concurrent fetches after one change got different documents")
		}
	}
	_, after := verifiedRevocations(t, a)
	if after.Sequence != before.Sequence+1 || len(after.Revoked) != 1 {
		t.Fatalf("one revocation and 20 fetches: sequence %d → %d (want one signature), revoked %v", before.Sequence, after.Sequence, after.Revoked)
	}
}

// TestRevocationDocumentSurvivesDatabaseRestore: the whole database put
// back to an earlier state (audit log, head, stored document, sequence
// counter, as a backup restore does) takes neither the published audit head
// nor the document sequence back.
func TestRevocationDocumentSurvivesDatabaseRestore(t *testing.T) {
	ctx := t.Context()
	a, dir := newAuthority(t)
	advance := manualClock(a)
	_, r0 := verifiedRevocations(t, a)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "cardsign.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The "backup": the stored document and the counter as they are now.
	var docSeq, counter int64
	var body, meta []byte
	if err := db.QueryRowContext(ctx, `SELECT seq, body, meta FROM documents WHERE name = 'revocations'`).Scan(&docSeq, &body, &meta); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT value FROM sequences WHERE name = 'revocations'`).Scan(&counter); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		sum := sha256.Sum256([]byte{byte(i)})
		if _, err := a.store.AppendAudit(ctx, []audit.Record{{Time: a.now(), Caller: "t", CanonicalSHA256: sum[:], Signature: "s"}}); err != nil {
			t.Fatal(err)
		}
	}
	advance(revocations.HeadRefresh)
	_, r1 := verifiedRevocations(t, a)
	if r1.AuditHead.Seq != 4 || r1.Sequence <= r0.Sequence { // the first key's record, then three
		t.Fatalf("after three records: %+v", r1)
	}
	for _, q := range []string{
		`DROP TRIGGER audit_no_delete`, `DROP TRIGGER audit_head_forward_only`,
		`DELETE FROM audit`, `UPDATE audit_head SET seq = 0, hash = zeroblob(32)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := db.ExecContext(ctx, `UPDATE documents SET seq = ?, body = ?, meta = ? WHERE name = 'revocations'`, docSeq, body, meta); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE sequences SET value = ? WHERE name = 'revocations'`, counter); err != nil {
		t.Fatal(err)
	}
	a.changed(store.TopicDocuments)
	_, r2 := verifiedRevocations(t, a)
	if r2.AuditHead.Seq != 4 || r2.Sequence <= r1.Sequence {
		t.Fatalf("after the restore: sequence %d (published %d before), audit head %d (published 4 before)", r2.Sequence, r1.Sequence, r2.AuditHead.Seq)
	}
}

// TestDutiesLeaseYieldedByReplicaThatCannotSign: a lease holder that
// cannot open the signing key gives the lease up after a few rounds, and
// does not take it back while a replica that can sign holds it.
func TestDutiesLeaseYieldedByReplicaThatCannotSign(t *testing.T) {
	ctx := t.Context()
	good, dir := newAuthority(t)
	st := openStore(t, dir)
	// No backend at all: every key on record fails to open here.
	bad := NewAuthority(Config{Backends: backends.NewRegistry(), RevocationTTL: time.Hour, Replica: "bad"}, st, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { bad.Close() })
	for round := 1; round <= yieldAfter; round++ {
		err := bad.dutyRound(ctx)
		if err == nil || !errors.As(err, new(*KeyUnavailableError)) {
			t.Fatalf("round %d of a replica that cannot open the key: %v", round, err)
		}
		_, held, _ := bad.duties.held(ctx)
		if want := round < yieldAfter; held != want {
			t.Fatalf("after round %d the replica that cannot sign holds the lease: %v, want %v", round, held, want)
		}
	}
	if err := good.dutyRound(ctx); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := good.duties.held(ctx); !held {
		t.Fatal("the replica that can sign did not take the yielded lease")
	}
	if err := bad.dutyRound(ctx); err != nil {
		t.Fatalf("a yielding replica's round: %v", err)
	}
	if _, held, _ := bad.duties.held(ctx); held {
		t.Fatal("the replica that cannot sign took the lease back")
	}
	verifiedRevocations(t, good)
}
