package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/storetest"
)

func trailKey(t *testing.T, kid string, created time.Time) jwks.KeyRecord {
	k := storetest.NewKey(t, kid, created)
	k.URI, k.PublishAt = "file:/k/"+kid, created
	return k
}

// TestKeyTrail: key records are checked against the last key
// administration record of each kid; every way of editing the keys table
// behind cardsignd's back is found, and keys from before the trail are
// taken as they are only when the log did not start with one.
func TestKeyTrail(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	k1 := trailKey(t, "k1", t0)
	k2 := trailKey(t, "k2", t0.Add(time.Hour))
	legacy := trailKey(t, "old", t0.Add(-time.Hour))
	revoked := k2
	at := t0.Add(2 * time.Hour)
	revoked.RevokedAt, revoked.RevokeReason = &at, "compromise"
	retired := k1
	rt := t0.Add(3 * time.Hour)
	retired.RetireAt = &rt

	rec := func(seq int64, kind audit.Kind, k jwks.KeyRecord) audit.Record {
		r, err := store.KeyAudit(kind, k, "token:alice", "", "", k.CreatedAt)
		if err != nil {
			t.Fatal(err)
		}
		r.Seq = seq
		return r
	}
	sig := audit.Record{Seq: 1, Outcome: audit.OutcomeSigned, KID: "old"}
	// The log of a cardsignd that audited keys from its first key on, and
	// one upgraded after signing with a key from before.
	fromStart := []audit.Record{rec(1, audit.KindKeyCreate, k1), rec(2, audit.KindKeyRotate, k2), rec(3, audit.KindKeyRevoke, revoked), rec(4, audit.KindKeyRetire, retired)}
	upgraded := []audit.Record{sig, rec(2, audit.KindKeyCreate, k1), rec(3, audit.KindKeyRotate, k2), rec(4, audit.KindKeyRevoke, revoked), rec(5, audit.KindKeyRetire, retired)}
	// The same upgraded log whose older key, revoked, got its baseline
	// record at the first start after the upgrade: the trail is complete
	// from there on.
	legacyRevoked := legacy
	lat := t0.Add(-time.Minute)
	legacyRevoked.RevokedAt, legacyRevoked.RevokeReason = &lat, "compromise"
	legacyErased := legacyRevoked
	legacyErased.RevokedAt, legacyErased.RevokeReason = nil, ""
	baselined := []audit.Record{sig, rec(2, audit.KindKeyBaseline, legacyRevoked), rec(3, audit.KindKeyCreate, k1), rec(4, audit.KindKeyRotate, k2),
		rec(5, audit.KindKeyRevoke, revoked), rec(6, audit.KindKeyRetire, retired)}

	unrevoked := revoked
	unrevoked.RevokedAt, unrevoked.RevokeReason = nil, ""
	moved := revoked
	later := at.Add(time.Second)
	moved.RevokedAt = &later
	reworded := revoked
	reworded.RevokeReason = "routine"
	swapped := trailKey(t, "k2", revoked.CreatedAt)
	swapped.RevokedAt, swapped.RevokeReason = revoked.RevokedAt, revoked.RevokeReason
	rogue := trailKey(t, "rogue", t0.Add(5*time.Hour))
	unretired := k1
	backdated := trailKey(t, "rogue", t0.Add(-2*time.Hour))

	tests := []struct {
		name       string
		log        []audit.Record
		keys       []jwks.KeyRecord
		how        store.KeyCheck
		want       string // in the first problem; "" for none
		wantLegacy int
	}{
		{"agrees", fromStart, []jwks.KeyRecord{retired, revoked}, store.CheckAll, "", 0},
		{"revocation erased", fromStart, []jwks.KeyRecord{retired, unrevoked}, store.CheckAll, "revoked_at: the audit trail says", 0},
		{"revocation erased, served view", fromStart, []jwks.KeyRecord{retired, unrevoked}, store.CheckServed, "revoked_at", 0},
		{"revocation moved", fromStart, []jwks.KeyRecord{retired, moved}, store.CheckAll, "revoked_at", 0},
		{"reason changed", fromStart, []jwks.KeyRecord{retired, reworded}, store.CheckAll, "revoke reason", 0},
		{"public key swapped", fromStart, []jwks.KeyRecord{retired, swapped}, store.CheckAll, "public key", 0},
		{"retirement erased", fromStart, []jwks.KeyRecord{unretired, revoked}, store.CheckAll, "retire_at", 0},
		{"retirement is derived in a served view", fromStart, []jwks.KeyRecord{unretired, revoked}, store.CheckServed, "", 0},
		{"key added", fromStart, []jwks.KeyRecord{retired, revoked, rogue}, store.CheckAll, "no audit record created or imported it", 0},
		{"key added, backdated", fromStart, []jwks.KeyRecord{backdated, retired, revoked}, store.CheckAll, "no audit record created or imported it", 0},
		{"key deleted", fromStart, []jwks.KeyRecord{retired}, store.CheckAll, "deleted outside cardsignd", 0},
		{"upgraded: older key taken as it is", upgraded, []jwks.KeyRecord{legacy, retired, revoked}, store.CheckAll, "", 1},
		{"upgraded: revocation erased", upgraded, []jwks.KeyRecord{legacy, retired, unrevoked}, store.CheckAll, "revoked_at", 1},
		{"upgraded: key added after", upgraded, []jwks.KeyRecord{legacy, retired, revoked, rogue}, store.CheckAll, "no audit record", 1},
		{"baselined: older key agrees", baselined, []jwks.KeyRecord{legacyRevoked, retired, revoked}, store.CheckAll, "", 0},
		{"baselined: older key's revocation erased", baselined, []jwks.KeyRecord{legacyErased, retired, revoked}, store.CheckAll, "revoked_at: the audit trail says", 0},
		{"baselined: key added, backdated before the trail", baselined, []jwks.KeyRecord{backdated, legacyRevoked, retired, revoked}, store.CheckAll, "no audit record created or imported it", 0},
		{"baselined: older key deleted", baselined, []jwks.KeyRecord{retired, revoked}, store.CheckAll, "deleted outside cardsignd", 0},
		{"no key records at all: every key predates", []audit.Record{sig}, []jwks.KeyRecord{legacy, k1}, store.CheckAll, "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var trail store.KeyTrail
			for _, r := range tt.log {
				if err := trail.Add(r); err != nil {
					t.Fatal(err)
				}
			}
			problems, legacy := trail.Check(tt.keys, tt.how)
			switch {
			case tt.want == "" && len(problems) > 0:
				t.Fatalf("problems %v, want none", problems)
			case tt.want != "" && len(problems) == 0:
				t.Fatalf("no problem found, want %q", tt.want)
			case tt.want != "" && (!strings.Contains(problems[0].Error(), tt.want) || !errors.Is(problems[0], store.ErrKeyTrail)):
				t.Fatalf("problem %v, want one saying %q", problems[0], tt.want)
			}
			if len(legacy) != tt.wantLegacy {
				t.Fatalf("legacy keys %v, want %d", legacy, tt.wantLegacy)
			}
		})
	}
}

// TestCheckRevocations: every key the store's signed revocation document
// lists must be revoked in its key records at the same time, and the
// document must verify against the keys on record; one below the
// revocation counter is named as a possible rollback.
func TestCheckRevocations(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	signerPriv := testsupport.Key(t, jose.ES256)
	spub, err := jose.NewJWK(signerPriv.Public(), "signer", "ES256")
	if err != nil {
		t.Fatal(err)
	}
	signer := jwks.KeyRecord{KID: "signer", Alg: jose.ES256, Public: spub, CreatedAt: t0, PublishAt: t0}
	old := trailKey(t, "old", t0)
	at := t0.Add(time.Hour).Add(123 * time.Millisecond) // the document writes whole seconds
	old.RevokedAt, old.RevokeReason = &at, "key-compromise"
	sign := func(seq int64, kids ...jwks.KeyRecord) store.Document {
		var revoked []jwks.Revocation
		for _, k := range kids {
			revoked = append(revoked, jwks.Revocation{KID: k.KID, RevokedAt: *k.RevokedAt, Reason: k.RevokeReason})
		}
		body, err := jwks.SignRevocations(t.Context(), jwks.Revocations{Sequence: seq, IssuedAt: t0, ExpiresAt: t0.Add(time.Hour), Revoked: revoked},
			signerPriv, jose.ES256, "signer")
		if err != nil {
			t.Fatal(err)
		}
		return store.Document{Name: store.RevocationsDocument, Seq: seq, Body: body}
	}
	doc := sign(3, old)

	// Agreeing records pass, though the document expired long ago.
	if problems, err := store.CheckRevocations(doc, []jwks.KeyRecord{signer, old}); err != nil || len(problems) != 0 {
		t.Fatalf("agreeing records: %v %v", problems, err)
	}
	erased := old
	erased.RevokedAt, erased.RevokeReason = nil, ""
	moved := old
	later := at.Add(time.Minute)
	moved.RevokedAt = &later
	for _, c := range []struct {
		name string
		keys []jwks.KeyRecord
		want string
	}{
		{"erased", []jwks.KeyRecord{signer, erased}, "the revocation was erased"},
		{"moved", []jwks.KeyRecord{signer, moved}, "the store has it revoked at"},
		{"deleted", []jwks.KeyRecord{signer}, "the store has no record of it"},
	} {
		problems, err := store.CheckRevocations(doc, c.keys)
		if err != nil || len(problems) != 1 || problems[0].KID != "old" || !strings.Contains(problems[0].Reason, c.want) ||
			!errors.Is(problems[0], store.ErrKeyTrail) {
			t.Errorf("%s: %v %v, want one problem with old: %q", c.name, problems, err, c.want)
		}
	}
	// A document behind the counter is named, not refused: an interrupted
	// signing leaves the same.
	if n := store.RevocationsBehind(2, 3); !strings.Contains(n, "rollback") {
		t.Errorf("a document below the counter: %q", n)
	}
	if n := store.RevocationsBehind(0, 1); !strings.Contains(n, "no revocation document is stored") {
		t.Errorf("no document, counter 1: %q", n)
	}
	if n := store.RevocationsBehind(3, 3) + store.RevocationsBehind(0, 0); n != "" {
		t.Errorf("a document at the counter, or none and no counter: %q", n)
	}
	// A document no key on record signed (its signer's record replaced).
	other := trailKey(t, "signer", t0)
	if _, err := store.CheckRevocations(doc, []jwks.KeyRecord{other, erased}); !errors.Is(err, store.ErrKeyTrail) || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("a document the signer on record did not sign: %v", err)
	}
	// Its row's sequence raised to pass the counter.
	bumped := sign(2)
	bumped.Seq = 3
	if _, err := store.CheckRevocations(bumped, []jwks.KeyRecord{signer, erased}); !errors.Is(err, store.ErrKeyTrail) {
		t.Errorf("a document whose row says another sequence: %v", err)
	}
}

// TestCheckUpdate: the fields fixed at a key's creation, and its
// revocation, are the ones an update may not change.
func TestCheckUpdate(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	t1 := t0.Add(time.Hour)
	base := func() jwks.KeyRecord {
		return jwks.KeyRecord{
			KID: "k1", URI: "file:/keys/k1.pem", Alg: jose.Alg("ES256"),
			Public:    jose.JWK{Kty: "EC", Crv: "P-256", X: "x", Y: "y", Kid: "k1"},
			CreatedAt: t0, PublishAt: t0,
		}
	}
	revoked := func() jwks.KeyRecord {
		r := base()
		r.RevokedAt, r.RevokeReason = &t1, "compromised"
		return r
	}
	tests := []struct {
		name      string
		old       jwks.KeyRecord
		mod       func(r *jwks.KeyRecord)
		immutable bool
	}{
		{"no change", base(), func(*jwks.KeyRecord) {}, false},
		{"mutable times", base(), func(r *jwks.KeyRecord) {
			r.PublishAt, r.ActivateAt, r.RetireAt, r.ExpireAt = t1, &t1, &t1, &t1
		}, false},
		{"revoke", base(), func(r *jwks.KeyRecord) { r.RevokedAt, r.RevokeReason = &t1, "x" }, false},
		{"created_at same instant, other zone", base(), func(r *jwks.KeyRecord) {
			r.CreatedAt = t0.In(time.FixedZone("x", 7200))
		}, false},
		{"revoked_at same instant", revoked(), func(r *jwks.KeyRecord) { same := t1; r.RevokedAt = &same }, false},
		{"kid", base(), func(r *jwks.KeyRecord) { r.KID = "k2" }, true},
		{"created_at", base(), func(r *jwks.KeyRecord) { r.CreatedAt = t1 }, true},
		{"public", base(), func(r *jwks.KeyRecord) { r.Public.X = "other" }, true},
		{"uri", base(), func(r *jwks.KeyRecord) { r.URI = "file:/elsewhere" }, true},
		{"alg", base(), func(r *jwks.KeyRecord) { r.Alg = "ES384" }, true},
		{"unrevoke", revoked(), func(r *jwks.KeyRecord) { r.RevokedAt = nil }, true},
		{"redate revocation", revoked(), func(r *jwks.KeyRecord) { r.RevokedAt = &t0 }, true},
		{"change revoke reason", revoked(), func(r *jwks.KeyRecord) { r.RevokeReason = "oops" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			updated := tt.old
			tt.mod(&updated)
			err := store.CheckUpdate(tt.old, updated)
			if got := errors.Is(err, store.ErrImmutable); got != tt.immutable {
				t.Fatalf("CheckUpdate = %v, want ErrImmutable: %v", err, tt.immutable)
			}
		})
	}
}
