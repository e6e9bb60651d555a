package postgres

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/storetest"
)

func record(id string) audit.Record {
	return audit.Record{
		Time: time.Now(), Caller: "c", RequestID: id, CardName: "n", CardVersion: "1",
		CanonicalSHA256: make([]byte, 32), KID: "k1", Alg: "ES256", Profile: "spec", Signature: "s",
	}
}

// newKey returns a key record created and published now.
func newKey(t testing.TB, kid string) jwks.KeyRecord {
	k := storetest.NewKey(t, kid, time.Now())
	k.URI, k.PublishAt = "file:/keys/"+kid, k.CreatedAt
	return k
}

// TestGuards: what the store never does is refused by the database too,
// whoever sends the statement: deleting or rewriting audit records, moving
// the audit head back, inserting a record that does not extend it, deleting
// keys or changing their fixed fields.
func TestGuards(t *testing.T) {
	ctx := t.Context()
	s := openT(t, newDB(t))
	k := newKey(t, "k1")
	k.RevokedAt, k.RevokeReason = new(time.Now()), "compromise"
	if err := s.CreateKey(ctx, k, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendAudit(ctx, []audit.Record{record("a")}); !errors.Is(err, store.ErrKeyRevoked) {
		t.Fatalf("append by a revoked key: %v", err)
	}
	if err := s.CreateKey(ctx, newKey(t, "k2"), nil); err != nil {
		t.Fatal(err)
	}
	a, b := record("a"), record("b")
	a.KID, b.KID = "k2", "k2"
	out, err := s.AppendAudit(ctx, []audit.Record{a, b})
	if err != nil {
		t.Fatal(err)
	}
	fork := record("c")
	fork.KID, fork.Seq, fork.PrevHash = "k2", 3, out[0].Hash // the next seq, chained to record 1
	fork.Hash = fork.ComputeHash(fork.PrevHash)
	dup := fork
	dup.Seq = 2 // a second record 2
	wrong := fork
	wrong.PrevHash = bytes.Repeat([]byte{7}, 32) // the next seq, chained to nothing
	wrong.Hash = wrong.ComputeHash(wrong.PrevHash)
	skip := fork
	skip.Seq, skip.PrevHash = 4, out[1].Hash // leaves a gap
	skip.Hash = skip.ComputeHash(skip.PrevHash)
	insert := func(r audit.Record) string {
		return `INSERT INTO audit (` + auditColumns + `) VALUES (` +
			strconv.FormatInt(r.Seq, 10) + `, 0, 'c', 'r', 'n', '1', '\x` + strings.Repeat("00", 32) + `', 'k2', 'ES256', 'spec', 's', '\x` +
			hex.EncodeToString(r.PrevHash) + `', '\x` + hex.EncodeToString(r.Hash) + `', 'signed', '', '', '')`
	}
	tests := []struct {
		sql, want string
	}{
		{`UPDATE audit SET caller = 'x' WHERE seq = 1`, "append-only"},
		{`DELETE FROM audit WHERE seq = 2`, "append-only"},
		{`TRUNCATE audit`, "append-only"},
		{`UPDATE audit_head SET seq = 1`, "only moves forward"},
		{`UPDATE audit_head SET seq = seq`, "only moves forward"},
		{`DELETE FROM audit_head`, "never deleted"},
		{`TRUNCATE audit_head`, "never deleted"},
		{`INSERT INTO audit_head (id, seq, hash) VALUES (2, 9, '\x` + strings.Repeat("00", 32) + `')`, "audit_head_id_check"},
		{insert(fork), "audit_prev_hash_key"},
		{insert(wrong), "does not extend"},
		{insert(dup), "audit_pkey"},
		{insert(skip), "does not extend"},
		{`DELETE FROM keys WHERE kid = 'k1'`, "never deleted"},
		{`TRUNCATE keys`, "never deleted"},
		{`UPDATE keys SET uri = 'file:/other' WHERE kid = 'k2'`, "immutable"},
		{`UPDATE keys SET created_at = 0 WHERE kid = 'k2'`, "immutable"},
		{`UPDATE keys SET revoked_at = NULL WHERE kid = 'k1'`, "immutable"},
		{`UPDATE keys SET revoke_reason = 'other' WHERE kid = 'k1'`, "immutable"},
		{`DELETE FROM keyset_lock`, "never deleted"},
	}
	for _, tt := range tests {
		_, err := s.pool.Exec(ctx, tt.sql)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.sql, err, tt.want)
		}
	}
	// Changes the store makes still go through.
	if _, err := s.pool.Exec(ctx, `UPDATE keys SET publish_at = publish_at + 1 WHERE kid = 'k2'`); err != nil {
		t.Errorf("a mutable field: %v", err)
	}
	if seq, hash, err := s.AuditHead(ctx); err != nil || seq != 2 || !bytes.Equal(hash, out[1].Hash) {
		t.Fatalf("AuditHead = %d, %x, %v", seq, hash, err)
	}
	next, err := s.AppendAudit(ctx, []audit.Record{a})
	if err != nil || next[0].Seq != 3 {
		t.Fatalf("append after the refusals: %+v, %v", next, err)
	}
	if err := audit.VerifyChain(audit.Genesis(), storetest.ListAudit(t, s)); err != nil {
		t.Fatal(err)
	}
}

// TestAppendWaitsForRevoke: an append that reaches a key while a revocation
// of it is in flight (updated, not committed) waits for the revocation and
// then refuses the record; it must not read the key's old row and commit a
// record after the revocation. A plain SELECT of revoked_at would not wait.
// The reverse: a revocation waits for an append that read the key first, so
// that append's records precede it.
func TestAppendWaitsForRevoke(t *testing.T) {
	ctx := t.Context()
	url := newDB(t)
	s := openT(t, url)
	for _, kid := range []string{"k1", "k2"} {
		if err := s.CreateKey(ctx, newKey(t, kid), nil); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	// A revocation in flight.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE keys SET revoked_at = 1, revoke_reason = 'compromise' WHERE kid = 'k1'`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.AppendAudit(ctx, []audit.Record{record("during")})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("AppendAudit returned (%v) while a revocation of its key was in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrKeyRevoked) {
		t.Fatalf("AppendAudit after the revocation committed: %v, want ErrKeyRevoked", err)
	}

	// An append in flight, holding k2 as AppendAudit does: the revocation
	// waits for it.
	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, lockKeysShared, []string{"k2"}); err != nil {
		t.Fatal(err)
	}
	go func() {
		done <- s.UpdateKeys(ctx, func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) {
			r := recs[1]
			r.RevokedAt, r.RevokeReason = new(time.Now()), "superseded"
			return []jwks.KeyRecord{r}, nil
		})
	}()
	select {
	case err := <-done:
		t.Fatalf("UpdateKeys returned (%v) while an append held the key", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := storetest.ListAudit(t, s); len(got) != 0 {
		t.Fatalf("%d records stored, want none", len(got))
	}
}

// TestWatch: changes committed through another handle are announced with
// their topic, a rolled-back change is not, and a lost connection is
// re-established and reported with "".
func TestWatch(t *testing.T) {
	url := newDB(t)
	s1, s2 := openT(t, url), openT(t, url)
	ctx, cancel := context.WithCancel(t.Context())
	topics := make(chan string, 16)
	watchErr := make(chan error, 1)
	go func() { watchErr <- s1.Watch(ctx, func(topic string) { topics <- topic }) }()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-topics:
			if got != want {
				t.Fatalf("topic %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no topic in 10s, want %q", want)
		}
	}
	next("") // connected
	if err := s2.CreateKey(t.Context(), newKey(t, "k1"), nil); err != nil {
		t.Fatal(err)
	}
	next(store.TopicKeys)
	refused := errors.New("no")
	if err := s2.CreateKey(t.Context(), newKey(t, "k2"), func([]jwks.KeyRecord) error { return refused }); err != refused {
		t.Fatal(err)
	}
	if err := s2.UpdateKeys(t.Context(), func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) {
		recs[0].RetireAt = new(time.Now())
		return recs, nil
	}); err != nil {
		t.Fatal(err)
	}
	next(store.TopicKeys) // the update's, not the refused create's: one each
	l, err := s2.AcquireLease(t.Context(), "duties", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.PutDocument(t.Context(), l, store.Document{Name: "d", Seq: 1, Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	next(store.TopicDocuments)
	// The listening connection is killed, as a database restart or a
	// failover would: Watch reconnects and says announcements may have
	// been missed.
	if err := cluster.SuperExec(t.Context(), "postgres",
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'cardsign-listen'`); err != nil {
		t.Fatal(err)
	}
	next("")
	if _, err := s2.MakeKey(t.Context(), func(context.Context, []jwks.KeyRecord) (jwks.KeyRecord, error) {
		return newKey(t, "k3"), nil
	}); err != nil {
		t.Fatal(err)
	}
	next(store.TopicKeys)
	cancel()
	select {
	case err := <-watchErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Watch returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after its context ended")
	}
	select {
	case extra := <-topics:
		t.Fatalf("unexpected topic %q", extra)
	default:
	}
}

// TestConcurrentAppendAndKeys mixes appends, key changes and leases from
// several handles: nothing deadlocks or fails, and the chain verifies.
func TestConcurrentAppendAndKeys(t *testing.T) {
	ctx := t.Context()
	url := newDB(t)
	handles := []*Store{openT(t, url), openT(t, url), openT(t, url)}
	for _, kid := range []string{"k1", "k2"} {
		if err := handles[0].CreateKey(ctx, newKey(t, kid), nil); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for h, s := range handles {
		wg.Go(func() {
			for i := range 30 {
				a, b := record("a"), record("b")
				b.KID = "k2"
				if _, err := s.AppendAudit(ctx, []audit.Record{a, b}); err != nil {
					errs <- err
					return
				}
				if i%5 == h {
					err := s.UpdateKeys(ctx, func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) {
						for j := range recs {
							recs[j].PublishAt = recs[j].PublishAt.Add(time.Nanosecond)
						}
						return recs, nil
					})
					if err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	recs := storetest.ListAudit(t, handles[1])
	if len(recs) != 3*30*2 {
		t.Fatalf("%d records, want %d", len(recs), 3*30*2)
	}
	if err := audit.VerifyChain(audit.Genesis(), recs); err != nil {
		t.Fatal(err)
	}
}

// TestTransactionSettings: store transactions run at READ COMMITTED with the
// idle-in-transaction timeout that frees the locks of a paused replica.
func TestTransactionSettings(t *testing.T) {
	s := openT(t, newDB(t))
	var iso, idle, app string
	err := s.inTx(t.Context(), func(tx pgx.Tx) error {
		return tx.QueryRow(t.Context(), `SELECT current_setting('transaction_isolation'),
			current_setting('idle_in_transaction_session_timeout'), current_setting('application_name')`).Scan(&iso, &idle, &app)
	})
	if err != nil {
		t.Fatal(err)
	}
	if iso != "read committed" || idle != "30s" || app != "cardsign" {
		t.Fatalf("isolation %q, idle_in_transaction_session_timeout %q, application_name %q; want read committed, 30s, cardsign", iso, idle, app)
	}
	// SET LOCAL: the session keeps the server's default.
	if err := s.pool.QueryRow(t.Context(), `SELECT current_setting('idle_in_transaction_session_timeout')`).Scan(&idle); err != nil || idle != "0" {
		t.Fatalf("outside a transaction: %q, %v", idle, err)
	}
}

// TestMakeKeyPanic: a make that panics leaves no transaction open, so the
// key-set lock is free for the next change.
func TestMakeKeyPanic(t *testing.T) {
	s := openT(t, newDB(t))
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want make's panic", p)
			}
		}()
		s.MakeKey(t.Context(), func(context.Context, []jwks.KeyRecord) (jwks.KeyRecord, error) { panic("boom") })
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := s.CreateKey(ctx, newKey(t, "k1"), nil); err != nil {
		t.Fatalf("CreateKey after a panicking make: %v", err)
	}
}
