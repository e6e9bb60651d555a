package server

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/server/revocations"
)

// TestRevocationsCarryAuditHead: the revocation document carries the audit
// head; it follows the head at most once per revocations.HeadRefresh; and a
// store head that goes back (the database edited under the daemon) does not
// lower the published head.
func TestRevocationsCarryAuditHead(t *testing.T) {
	ctx := t.Context()
	a, dir := newAuthority(t)
	advance := manualClock(a)

	fetch := func() ([]byte, jwks.Revocations) {
		t.Helper()
		doc, r := verifiedRevocations(t, a)
		if r.AuditHead == nil {
			t.Fatalf("revocation document without audit_head")
		}
		return doc, r
	}
	// The first key's record (its creation is audited) is record 1.
	recs, err := a.store.ListAudit(ctx, 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("before any signature: %d records, %v", len(recs), err)
	}
	appendRec := func() {
		t.Helper()
		sum := sha256.Sum256([]byte{byte(len(recs))})
		out, err := a.store.AppendAudit(ctx, []audit.Record{{Time: a.now(), Caller: "t", CanonicalSHA256: sum[:], Signature: "s"}})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, out...)
	}
	wantHead := func(r jwks.Revocations, seq int64, hash []byte) {
		t.Helper()
		if r.AuditHead.Seq != seq || !bytes.Equal(r.AuditHead.Hash, hash) {
			t.Fatalf("audit_head = %d %x, want %d %x", r.AuditHead.Seq, r.AuditHead.Hash, seq, hash)
		}
	}

	doc0, r0 := fetch()
	wantHead(r0, 1, recs[0].Hash)
	appendRec()
	appendRec()
	if doc, _ := fetch(); !bytes.Equal(doc, doc0) {
		t.Fatal("re-signed within revocations.HeadRefresh of the last document: one signature per fetch after every append")
	}
	advance(revocations.HeadRefresh)
	doc1, r1 := fetch()
	wantHead(r1, 3, recs[2].Hash)
	if r1.Sequence <= r0.Sequence {
		t.Fatalf("sequence %d after %d", r1.Sequence, r0.Sequence)
	}
	advance(revocations.HeadRefresh)
	if doc, _ := fetch(); !bytes.Equal(doc, doc1) {
		t.Fatal("re-signed although neither the head nor anything else changed")
	}

	// Someone with write access deletes record 3 and moves the head back.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "cardsign.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`DROP TRIGGER audit_no_delete`, `DROP TRIGGER audit_head_forward_only`,
		`DELETE FROM audit WHERE seq = 3`, `UPDATE audit_head SET seq = 2, hash = (SELECT hash FROM audit WHERE seq = 2)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	doc2, r2 := fetch()
	wantHead(r2, 3, recs[2].Hash)
	if bytes.Equal(doc2, doc1) {
		t.Fatal("not re-signed when the store's head went back")
	}
	if doc, _ := fetch(); !bytes.Equal(doc, doc2) {
		t.Fatal("re-signed again although the store's head did not move")
	}
	a.revocations.Forget()
	_, r3 := fetch()
	wantHead(r3, 3, recs[2].Hash)
}

// TestRevocationsWithoutAuditHead: revocations.audit_head: false publishes
// documents that verifiers built before the member can still read.
func TestRevocationsWithoutAuditHead(t *testing.T) {
	a, _ := newAuthority(t)
	a.revocations = newPublisher(a, true)
	a.docs.revocations = a.revocations
	if _, r := verifiedRevocations(t, a); r.AuditHead != nil {
		t.Fatalf("document with audit_head %+v; want none", r.AuditHead)
	}
}

// verifiedRevocations fetches a's revocation document and verifies it
// against a's own JWKS.
func verifiedRevocations(t *testing.T, a *Authority) ([]byte, jwks.Revocations) {
	t.Helper()
	ctx := t.Context()
	doc, err := a.docs.Revocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set, err := a.docs.JWKS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := jwks.Parse(set.Body)
	if err != nil {
		t.Fatal(err)
	}
	r, err := jwks.VerifyRevocations(doc, keys, a.now())
	if err != nil {
		t.Fatal(err)
	}
	return doc, r
}

// manualClock sets a's clock to one that starts at the present and moves
// only by the advance it returns.
func manualClock(a *Authority) (advance func(time.Duration)) {
	var clock atomic.Int64
	clock.Store(time.Now().UTC().UnixNano())
	a.setClock(func() time.Time { return time.Unix(0, clock.Load()).UTC() })
	return func(d time.Duration) { clock.Add(int64(d)) }
}
