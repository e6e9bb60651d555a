package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// keyRecord is the audit record of kind done to rec at t.
func keyRecord(t *testing.T, kind audit.Kind, rec jwks.KeyRecord, reason string, at time.Time) audit.Record {
	t.Helper()
	r, err := store.KeyAudit(kind, rec, "admin:alice", "req-"+string(kind), reason, at)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// CheckKeyTrail fails t unless s's transparency log holds one entry per
// record of recs (all of s's audit records, oldest first) and s's key
// records agree with the key trail those records replay: the check every
// key administration test ends with, in this suite and in the server's.
func CheckKeyTrail(t testing.TB, s store.Store, recs []audit.Record) {
	t.Helper()
	ctx := t.Context()
	entries, err := s.LogEntries(ctx, 0, int64(len(recs)))
	if err != nil || len(entries) != len(recs) {
		t.Fatalf("the log holds %d entries (%v), want one per record (%d)", len(entries), err, len(recs))
	}
	keys, err := s.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var trail store.KeyTrail
	for _, r := range recs {
		if err := trail.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if problems, legacy := trail.Check(keys, store.CheckAll); len(problems) != 0 || len(legacy) != 0 {
		t.Fatalf("the key records disagree with their own trail: %v (legacy %v)", problems, legacy)
	}
}

// testChangeKeys creates a key and revokes it with ChangeKeys: each change
// and its audit record commit together, the records chain like any other
// (a revocation's record is not refused for naming its revoked key), each
// is a transparency-log leaf, and the key records agree with the trail.
func testChangeKeys(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	if _, err := s.AppendAudit(ctx, []audit.Record{newRecord("before", 1)}); err != nil {
		t.Fatal(err)
	}
	k := NewKey(t, "k1", base())
	out, err := s.ChangeKeys(ctx, store.KeyCreation, func(_ context.Context, recs []jwks.KeyRecord) (store.KeyChange, error) {
		if len(recs) != 0 {
			t.Errorf("ChangeKeys saw %d keys, want 0", len(recs))
		}
		return store.KeyChange{Create: &k, Audit: []audit.Record{keyRecord(t, audit.KindKeyCreate, k, "", base())}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Seq != 2 || out[0].Kind() != audit.KindKeyCreate {
		t.Fatalf("ChangeKeys returned %+v, want the key.create record as seq 2", out)
	}
	revokedAt := base().Add(time.Hour)
	out, err = s.ChangeKeys(ctx, store.KeyTransition, func(_ context.Context, recs []jwks.KeyRecord) (store.KeyChange, error) {
		r := recs[0]
		r.RevokedAt, r.RevokeReason = &revokedAt, "compromise"
		return store.KeyChange{Update: []jwks.KeyRecord{r}, Audit: []audit.Record{keyRecord(t, audit.KindKeyRevoke, r, "compromise", revokedAt)}}, nil
	})
	if err != nil {
		t.Fatalf("revoking with its audit record: %v", err)
	}
	if len(out) != 1 || out[0].Seq != 3 {
		t.Fatalf("ChangeKeys returned %+v, want the key.revoke record as seq 3", out)
	}
	recs := listAll(t, s)
	if len(recs) != 3 || recs[2].Kind() != audit.KindKeyRevoke || recs[2].Reason != "compromise" || recs[2].KID != "k1" {
		t.Fatalf("records %+v, want signed, key.create, key.revoke", recs)
	}
	if !equalRecords(recs[2], out[0]) {
		t.Fatalf("listed %+v, appended %+v", recs[2], out[0])
	}
	st, err := audit.DecodeKeyState(recs[2].Detail)
	if err != nil || st.RevokedAt == nil || !st.RevokedAt.Equal(revokedAt) {
		t.Fatalf("the revocation record's key state %+v (%v), want revoked at %s", st, err, revokedAt)
	}
	CheckKeyTrail(t, s, recs)
	// Signatures by the revoked key are still refused.
	if _, err := s.AppendAudit(ctx, []audit.Record{newRecord("late", 5)}); !errors.Is(err, store.ErrKeyRevoked) {
		t.Fatalf("a signature by the revoked key: %v, want ErrKeyRevoked", err)
	}
}

// testChangeKeysRefusals: a change without an audit record of each key it
// changes, with a record of another kind, or refused by fn writes nothing.
func testChangeKeysRefusals(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	k := NewKey(t, "k1", base())
	if _, err := s.ChangeKeys(ctx, store.KeyCreation, func(context.Context, []jwks.KeyRecord) (store.KeyChange, error) {
		return store.KeyChange{Create: &k, Audit: []audit.Record{keyRecord(t, audit.KindKeyCreate, k, "", base())}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	revoked := k
	at := base().Add(time.Minute)
	revoked.RevokedAt, revoked.RevokeReason = &at, "x"
	other := NewKey(t, "k2", base())
	fnErr := errors.New("refused by fn")
	tests := []struct {
		name string
		ch   store.KeyChange
		err  error
		want error
	}{
		{"no audit record", store.KeyChange{Update: []jwks.KeyRecord{revoked}}, nil, store.ErrUnaudited},
		{"record of another key", store.KeyChange{Update: []jwks.KeyRecord{revoked}, Audit: []audit.Record{keyRecord(t, audit.KindKeyRevoke, other, "x", at)}}, nil, store.ErrUnaudited},
		{"create unaudited", store.KeyChange{Create: &other}, nil, store.ErrUnaudited},
		{"existing kid", store.KeyChange{Create: &k, Audit: []audit.Record{keyRecord(t, audit.KindKeyCreate, k, "", base())}}, nil, store.ErrExists},
		{"fn error", store.KeyChange{}, fnErr, fnErr},
		{"signature record", store.KeyChange{Update: []jwks.KeyRecord{revoked}, Audit: []audit.Record{newRecord("x", 1)}}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []store.KeyChangeMode{store.KeyTransition, store.KeyCreation} {
				_, err := s.ChangeKeys(ctx, mode, func(context.Context, []jwks.KeyRecord) (store.KeyChange, error) { return tt.ch, tt.err })
				if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
					t.Fatalf("ChangeKeys (mode %d): %v, want %v", mode, err, tt.want)
				}
				checkKeys(t, s, []jwks.KeyRecord{k})
				if n := len(listAll(t, s)); n != 1 {
					t.Fatalf("%d audit records after a refused change, want 1", n)
				}
			}
		})
	}
}

// testAuditRegistryRecords: registry administration records (their kind,
// reason and detail hashed) round-trip through AppendAudit; one without
// its detail is refused.
func testAuditRegistryRecords(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	sum := sha256.Sum256([]byte("card"))
	rec := audit.Record{Time: base(), Caller: "admin:bob", Outcome: string(audit.KindCardRevoke), Reason: "leaked",
		CanonicalSHA256: sum[:], Detail: audit.EncodeAgentDetail(audit.AgentDetail{Agent: "payments", Version: 3})}
	rm := rec
	rm.Outcome, rm.Reason, rm.Detail = string(audit.KindAgentRemove), "", audit.EncodeAgentDetail(audit.AgentDetail{Agent: "payments"})
	out, err := s.AppendAudit(ctx, []audit.Record{rec, rm})
	if err != nil {
		t.Fatal(err)
	}
	got := listAll(t, s)
	if len(got) != 2 || !equalRecords(got[0], out[0]) || !equalRecords(got[1], out[1]) || got[0].Kind() != audit.KindCardRevoke {
		t.Fatalf("listed %+v, appended %+v", got, out)
	}
	bad := rec
	bad.Detail = ""
	if _, err := s.AppendAudit(ctx, []audit.Record{bad}); err == nil {
		t.Fatal("a card.revoke record without its agent was appended")
	}
}
