// Package storetest checks a store.Store implementation against the
// contract documented on store.Store. SQLite and PostgreSQL run the same
// suite.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// Opener opens a new handle on one store. Every handle it returns sees the
// same data, as a second process (or replica) would; a handle closed and
// reopened must find everything committed before.
type Opener func(ctx context.Context) (store.Store, error)

// Run runs the contract tests. newStore returns an Opener for a fresh, empty
// store, to be cleaned up with t.Cleanup; Run closes the handles it opens.
func Run(t *testing.T, newStore func(t *testing.T) Opener) {
	runContract(t, newStore, []contractTest{
		{"Empty", testEmpty},
		{"KeysRoundTrip", testKeysRoundTrip},
		{"CreateKeyExists", testCreateKeyExists},
		{"CreateKeyInvalid", testCreateKeyInvalid},
		{"UpdateKeysRoundTrip", testUpdateKeysRoundTrip},
		{"UpdateKeysFnErrorWritesNothing", testUpdateKeysFnError},
		{"UpdateKeysRefusals", testUpdateKeysRefusals},
		{"UpdateKeysAtomicAcrossHandles", testUpdateKeysConcurrent},
		{"AuditRoundTrip", testAuditRoundTrip},
		{"AuditInvalidBatchWritesNothing", testAuditInvalid},
		{"AuditTwoHandlesOneChain", testAuditTwoHandles},
		{"AuditList", testAuditList},
		{"NextSequence", testNextSequence},
		{"Reopen", testReopen},
		{"ContextCanceled", testContextCanceled},
		{"CreateKeyCheckRefuses", testCreateKeyCheck},
		{"AuditRefusesRevokedKey", testAuditRefusesRevoked},
		{"AuditRefusedRecord", testAuditRefusedRecord},
		{"AuditRefusedRecordRevokedKeys", testAuditRefusedRevoked},
		{"AuditInvalidOutcome", testAuditInvalidOutcome},
		{"AuditProvenance", testAuditProvenance},
		{"ChangeKeys", testChangeKeys},
		{"ChangeKeysRefusals", testChangeKeysRefusals},
		{"BaselineKeys", testBaselineKeys},
		{"AuditRegistryRecords", testAuditRegistryRecords},
		{"Agents", testAgents},
		{"PublicAgentCard", testPublicAgentCard},
		{"AgentsConcurrentPuts", testAgentsConcurrent},
		{"AgentCounts", testAgentCounts},
		{"RevokedCards", testRevokedCards},
		{"RegistryAdminAudited", testRegistryAdminAudited},
		{"MakeKey", testMakeKey},
		{"MakeKeyRaceMakesOne", testMakeKeyRace},
		{"Now", testNow},
		{"Leases", testLeases},
		{"LeaseRaceOneHolder", testLeaseRace},
		{"Documents", testDocuments},
		{"Counters", testCounters},
		{"Approvals", testApprovals},
		{"ApprovalExpiry", testApprovalExpiry},
		{"ApprovalVotesRace", testApprovalVotesRace},
		{"EventCursors", testEventCursors},
	})
}

// contractTest is one named test of a suite, run on a fresh store.
type contractTest struct {
	name string
	fn   func(t *testing.T, open Opener)
}

// runContract runs each test as a subtest on its own fresh store.
func runContract(t *testing.T, newStore func(t *testing.T) Opener, tests []contractTest) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

func mustOpen(t *testing.T, open Opener) store.Store {
	t.Helper()
	s, err := open(t.Context())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func ptr(t time.Time) *time.Time { return &t }

// createRevoked stores a key kid revoked from base() on, as the only key
// whose signatures the store must refuse.
func createRevoked(t *testing.T, s store.Store, kid string) {
	t.Helper()
	k := NewKey(t, kid, base())
	k.RevokedAt, k.RevokeReason = ptr(base()), "compromise"
	if err := s.CreateKey(t.Context(), k, nil); err != nil {
		t.Fatal(err)
	}
}

// base is a fixed instant with nanoseconds, in a non-UTC zone, so round
// trips must keep nanoseconds and the instant (not the zone).
func base() time.Time {
	return time.Date(2026, 5, 4, 3, 2, 1, 123456789, time.FixedZone("CEST", 2*3600))
}

// NewKey returns a valid key record with a real (P-256) public key,
// created at created and published a minute later.
func NewKey(t testing.TB, kid string, created time.Time) jwks.KeyRecord {
	t.Helper()
	priv, err := jose.GenerateKey(jose.ES256, 0)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := jose.NewJWK(priv.Public(), kid, "ES256")
	if err != nil {
		t.Fatal(err)
	}
	return jwks.KeyRecord{
		KID:       kid,
		URI:       "file:/keys/" + kid + ".pem?pin-value=secret",
		Alg:       "ES256",
		Public:    pub,
		CreatedAt: created,
		PublishAt: created.Add(time.Minute),
	}
}

// equalKeys compares records as instants: the store may return times in UTC.
func equalKeys(a, b jwks.KeyRecord) bool {
	eqp := func(x, y *time.Time) bool {
		return (x == nil) == (y == nil) && (x == nil || x.Equal(*y))
	}
	return a.KID == b.KID && a.URI == b.URI && a.Alg == b.Alg && a.Public == b.Public &&
		a.CreatedAt.Equal(b.CreatedAt) && a.PublishAt.Equal(b.PublishAt) &&
		eqp(a.ActivateAt, b.ActivateAt) && eqp(a.RetireAt, b.RetireAt) &&
		eqp(a.ExpireAt, b.ExpireAt) && eqp(a.RevokedAt, b.RevokedAt) &&
		a.RevokeReason == b.RevokeReason
}

func fmtKey(r jwks.KeyRecord) string {
	f := func(t *time.Time) string {
		if t == nil {
			return "nil"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("{%s %s %s created=%s publish=%s activate=%s retire=%s expire=%s revoked=%s %q}",
		r.KID, r.URI, r.Alg, f(&r.CreatedAt), f(&r.PublishAt), f(r.ActivateAt), f(r.RetireAt), f(r.ExpireAt), f(r.RevokedAt), r.RevokeReason)
}

func checkKeys(t *testing.T, s store.Store, want []jwks.KeyRecord) {
	t.Helper()
	got, err := s.ListKeys(t.Context())
	if err != nil {
		t.Fatalf("ListKeys: %v", err)
	}
	if !slices.EqualFunc(got, want, equalKeys) {
		t.Errorf("ListKeys:")
		for _, r := range got {
			t.Errorf("  got  %s", fmtKey(r))
		}
		for _, r := range want {
			t.Errorf("  want %s", fmtKey(r))
		}
		t.FailNow()
	}
	for _, r := range got {
		for _, p := range []*time.Time{&r.CreatedAt, &r.PublishAt, r.ActivateAt, r.RetireAt, r.ExpireAt, r.RevokedAt} {
			if p != nil && p.Location() != time.UTC {
				t.Fatalf("key %s: time %v not in UTC", r.KID, p)
			}
		}
	}
}

func testEmpty(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	if keys, err := s.ListKeys(ctx); err != nil || len(keys) != 0 {
		t.Errorf("ListKeys = %v, %v; want none", keys, err)
	}
	if recs, err := s.ListAudit(ctx, 0, 0); err != nil || len(recs) != 0 {
		t.Errorf("ListAudit = %v, %v; want none", recs, err)
	}
	seq, hash, err := s.AuditHead(ctx)
	if err != nil || seq != 0 || !bytes.Equal(hash, audit.Genesis()) {
		t.Errorf("AuditHead = %d, %x, %v; want 0, genesis", seq, hash, err)
	}
	if out, err := s.AppendAudit(ctx, nil); err != nil || len(out) != 0 {
		t.Errorf("AppendAudit(nil) = %v, %v", out, err)
	}
}

func testKeysRoundTrip(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	// Every field set, including all optional times.
	full := NewKey(t, "k-full", base())
	full.ActivateAt = ptr(base().Add(time.Hour + 1))
	full.RetireAt = ptr(base().Add(2*time.Hour + 2))
	full.ExpireAt = ptr(base().Add(3*time.Hour + 3))
	full.RevokedAt = ptr(base().Add(4*time.Hour + 4))
	full.RevokeReason = "key compromise"
	// Every optional time nil.
	bare := NewKey(t, "k-bare", base().Add(-time.Hour))
	// Same CreatedAt as full: ordered by KID after CreatedAt.
	tieA := NewKey(t, "k-a", base())
	// Created at the Unix epoch: zero nanoseconds must not read back as nil.
	epoch := NewKey(t, "k-epoch", time.Unix(0, 0))
	epoch.ActivateAt = ptr(time.Unix(0, 0))

	for _, r := range []jwks.KeyRecord{full, bare, tieA, epoch} {
		if err := s.CreateKey(ctx, r, nil); err != nil {
			t.Fatalf("CreateKey(%s): %v", r.KID, err)
		}
	}
	checkKeys(t, s, []jwks.KeyRecord{epoch, bare, tieA, full})
}

func testCreateKeyExists(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	k := NewKey(t, "k1", base())
	if err := s.CreateKey(ctx, k, nil); err != nil {
		t.Fatal(err)
	}
	other := NewKey(t, "k1", base().Add(time.Hour))
	if err := s.CreateKey(ctx, other, nil); !errors.Is(err, store.ErrExists) {
		t.Fatalf("CreateKey(existing kid) = %v, want ErrExists", err)
	}
	// Revoked: the kid stays taken.
	err := s.UpdateKeys(ctx, func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) {
		recs[0].RevokedAt, recs[0].RevokeReason = ptr(base().Add(time.Minute)), "superseded"
		return recs, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateKey(ctx, other, nil); !errors.Is(err, store.ErrExists) {
		t.Fatalf("CreateKey(revoked kid) = %v, want ErrExists", err)
	}
	k.RevokedAt, k.RevokeReason = ptr(base().Add(time.Minute)), "superseded"
	checkKeys(t, s, []jwks.KeyRecord{k})
}

func testCreateKeyInvalid(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	tests := []struct {
		name string
		mod  func(r *jwks.KeyRecord)
	}{
		{"empty kid", func(r *jwks.KeyRecord) { r.KID = "" }},
		{"empty uri", func(r *jwks.KeyRecord) { r.URI = "" }},
		{"unknown alg", func(r *jwks.KeyRecord) { r.Alg = "none" }},
		{"empty public key", func(r *jwks.KeyRecord) { r.Public = jose.JWK{} }},
		{"broken public key", func(r *jwks.KeyRecord) { r.Public.X = "AAAA" }},
		{"zero created_at", func(r *jwks.KeyRecord) { r.CreatedAt = time.Time{} }},
		{"zero publish_at", func(r *jwks.KeyRecord) { r.PublishAt = time.Time{} }},
		{"unstorable activate_at", func(r *jwks.KeyRecord) { r.ActivateAt = ptr(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewKey(t, "k-"+tt.name, base())
			tt.mod(&r)
			if err := s.CreateKey(t.Context(), r, nil); err == nil {
				t.Fatal("CreateKey succeeded")
			}
		})
	}
	checkKeys(t, s, nil)
}

func testUpdateKeysRoundTrip(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	k1, k2, k3 := NewKey(t, "k1", base()), NewKey(t, "k2", base().Add(time.Second)), NewKey(t, "k3", base().Add(2*time.Second))
	k1.ActivateAt = ptr(base())
	k3.ExpireAt = ptr(base().Add(time.Hour))
	for _, r := range []jwks.KeyRecord{k1, k2, k3} {
		if err := s.CreateKey(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A rotation: k1 retires, k2 activates, k3's expiry is cleared; k3 is
	// left out of the result and must stay as it was otherwise.
	var seen []string
	err := s.UpdateKeys(ctx, func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) {
		for _, r := range recs {
			seen = append(seen, r.KID)
		}
		recs[0].RetireAt = ptr(base().Add(10 * time.Minute))
		recs[1].ActivateAt = ptr(base().Add(10 * time.Minute))
		recs[1].PublishAt = base().Add(-time.Minute)
		recs[2].ExpireAt = nil
		return recs[:2], nil
	})
	if err != nil {
		t.Fatalf("UpdateKeys: %v", err)
	}
	if !slices.Equal(seen, []string{"k1", "k2", "k3"}) {
		t.Errorf("fn saw %v, want every key in order", seen)
	}
	k1.RetireAt = ptr(base().Add(10 * time.Minute))
	k2.ActivateAt = ptr(base().Add(10 * time.Minute))
	k2.PublishAt = base().Add(-time.Minute)
	checkKeys(t, s, []jwks.KeyRecord{k1, k2, k3})

	// A set time can be cleared again.
	err = s.UpdateKeys(ctx, func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) {
		recs[0].RetireAt = nil
		return recs[:1], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	k1.RetireAt = nil
	checkKeys(t, s, []jwks.KeyRecord{k1, k2, k3})
}

func testUpdateKeysFnError(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	k1, k2 := NewKey(t, "k1", base()), NewKey(t, "k2", base().Add(time.Second))
	for _, r := range []jwks.KeyRecord{k1, k2} {
		if err := s.CreateKey(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	errFn := errors.New("fn says no")
	err := s.UpdateKeys(ctx, func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) {
		recs[0].RevokedAt = ptr(base())
		recs[1].ActivateAt = ptr(base())
		return recs, errFn
	})
	if err != errFn { // not errors.Is: "returned as is" is the contract
		t.Fatalf("UpdateKeys = %v, want fn's error as is", err)
	}
	checkKeys(t, s, []jwks.KeyRecord{k1, k2})
}

func testUpdateKeysRefusals(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	k1, k2 := NewKey(t, "k1", base()), NewKey(t, "k2", base().Add(time.Second))
	k2.RevokedAt, k2.RevokeReason = ptr(base()), "compromised"
	for _, r := range []jwks.KeyRecord{k1, k2} {
		if err := s.CreateKey(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	other := NewKey(t, "k1", base())
	tests := []struct {
		name string
		// mod changes recs[1] (k2) or recs[0]; recs[0] also gets a valid
		// change first, which must not be written either.
		mod  func(recs []jwks.KeyRecord) []jwks.KeyRecord
		want error // nil: any error
	}{
		{"kid", func(r []jwks.KeyRecord) []jwks.KeyRecord { r[0].KID = "k9"; return r }, store.ErrNotFound},
		{"created_at", func(r []jwks.KeyRecord) []jwks.KeyRecord { r[1].CreatedAt = base().Add(time.Hour); return r }, store.ErrImmutable},
		{"public", func(r []jwks.KeyRecord) []jwks.KeyRecord { r[1].Public = other.Public; return r }, store.ErrImmutable},
		{"uri", func(r []jwks.KeyRecord) []jwks.KeyRecord { r[1].URI = "file:/other"; return r }, store.ErrImmutable},
		{"alg", func(r []jwks.KeyRecord) []jwks.KeyRecord { r[1].Alg = "ES384"; return r }, store.ErrImmutable},
		{"unrevoke", func(r []jwks.KeyRecord) []jwks.KeyRecord { r[1].RevokedAt = nil; return r }, store.ErrImmutable},
		{"duplicate kid", func(r []jwks.KeyRecord) []jwks.KeyRecord { return append(r, r[1]) }, nil},
		{"unstorable time", func(r []jwks.KeyRecord) []jwks.KeyRecord { r[1].PublishAt = time.Time{}; return r }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.UpdateKeys(ctx, func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) {
				recs[0].ActivateAt = ptr(base().Add(time.Hour)) // valid on its own
				return tt.mod(recs), nil
			})
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("UpdateKeys = %v, want %v", err, tt.want)
			}
			checkKeys(t, s, []jwks.KeyRecord{k1, k2})
		})
	}
}

// testUpdateKeysConcurrent runs read-modify-write updates from two handles at
// once; a lost update means UpdateKeys is not one transaction.
func testUpdateKeysConcurrent(t *testing.T, open Opener) {
	s1, s2 := mustOpen(t, open), mustOpen(t, open)
	ctx := t.Context()
	if err := s1.CreateKey(ctx, NewKey(t, "k1", base()), nil); err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*each)
	for _, s := range []store.Store{s1, s2} {
		for range workers {
			wg.Go(func() {
				for range each {
					errs <- s.UpdateKeys(ctx, func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) {
						recs[0].RevokeReason += "x" // a counter, for the test's sake
						return recs, nil
					})
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("UpdateKeys: %v", err)
		}
	}
	keys, err := s2.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(keys[0].RevokeReason); got != 2*workers*each {
		t.Fatalf("%d of %d updates survived", got, 2*workers*each)
	}
}

func newRecord(id string, i int) audit.Record {
	sum := sha256.Sum256([]byte(id))
	return audit.Record{
		Time:            base().Add(time.Duration(i)*time.Millisecond + time.Duration(i)), // distinct nanoseconds
		Caller:          "caller-" + id,
		RequestID:       id,
		CardName:        "Agent " + id,
		CardVersion:     fmt.Sprintf("1.%d.0", i),
		CanonicalSHA256: sum[:],
		KID:             "k1",
		Alg:             "ES256",
		Profile:         "spec",
		Signature:       "sig-" + id,
	}
}

// newRefused returns a record of a refused signing request.
func newRefused(id string, i int) audit.Record {
	r := newRecord(id, i)
	r.KID, r.Alg, r.Profile, r.Signature = "", "", "", ""
	r.Outcome, r.Reason = audit.OutcomeRefused, "host policy: caller-"+id+" may not sign for evil.example"
	return r
}

// outcome is r.Outcome with "" read as audit.OutcomeSigned, as the hash does:
// a store may return either for a signed record.
func outcome(r audit.Record) string {
	if r.Outcome == "" {
		return audit.OutcomeSigned
	}
	return r.Outcome
}

func equalRecords(a, b audit.Record) bool {
	return a.Seq == b.Seq && a.Time.Equal(b.Time) && a.Caller == b.Caller && a.RequestID == b.RequestID &&
		a.CardName == b.CardName && a.CardVersion == b.CardVersion &&
		bytes.Equal(a.CanonicalSHA256, b.CanonicalSHA256) && a.KID == b.KID && a.Alg == b.Alg &&
		a.Profile == b.Profile && a.Signature == b.Signature &&
		outcome(a) == outcome(b) && a.Reason == b.Reason && a.Provenance == b.Provenance && a.Detail == b.Detail &&
		bytes.Equal(a.PrevHash, b.PrevHash) && bytes.Equal(a.Hash, b.Hash)
}

// ListAudit returns every audit record of s, checking nothing: tests of a
// broken chain read it so.
func ListAudit(t testing.TB, s store.AuditLog) []audit.Record {
	t.Helper()
	recs, err := s.ListAudit(t.Context(), 0, 0)
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	return recs
}

func listAll(t *testing.T, s store.Store) []audit.Record {
	t.Helper()
	recs := ListAudit(t, s)
	if err := audit.VerifyChain(audit.Genesis(), recs); err != nil {
		t.Fatalf("VerifyChain: %v", err)
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
	return recs
}

func testAuditRoundTrip(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	in := []audit.Record{newRecord("a", 1), newRecord("b", 2)}
	in[0].Seq, in[0].PrevHash, in[0].Hash = 99, []byte("bogus"), []byte("bogus") // ignored
	out, err := s.AppendAudit(ctx, in)
	if err != nil {
		t.Fatalf("AppendAudit: %v", err)
	}
	if len(out) != 2 || out[0].Seq != 1 || out[1].Seq != 2 {
		t.Fatalf("AppendAudit returned %+v", out)
	}
	for i, r := range out {
		if r.Time.Location() != time.UTC || !r.Time.Equal(in[i].Time) {
			t.Errorf("record %d time %v, want %v in UTC", i, r.Time, in[i].Time)
		}
	}
	stored := listAll(t, s)
	if !slices.EqualFunc(stored, out, equalRecords) {
		t.Fatalf("stored %+v\nreturned %+v", stored, out)
	}
	want := in[1]
	want.Seq, want.PrevHash, want.Hash = 2, out[0].Hash, out[1].Hash
	if !equalRecords(stored[1], want) || stored[1].Time.Nanosecond() != in[1].Time.Nanosecond() {
		t.Fatalf("stored %+v, want %+v", stored[1], want)
	}
	seq, hash, err := s.AuditHead(ctx)
	if err != nil || seq != 2 || !bytes.Equal(hash, out[1].Hash) {
		t.Fatalf("AuditHead = %d, %x, %v; want 2, %x", seq, hash, err, out[1].Hash)
	}
}

func testAuditInvalid(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	if _, err := s.AppendAudit(ctx, []audit.Record{newRecord("a", 1)}); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(r *audit.Record){
		func(r *audit.Record) { r.CanonicalSHA256 = r.CanonicalSHA256[:31] },
		func(r *audit.Record) { r.Time = time.Time{} },
	} {
		bad := newRecord("bad", 3)
		mod(&bad)
		if _, err := s.AppendAudit(ctx, []audit.Record{newRecord("b", 2), bad}); err == nil {
			t.Fatal("AppendAudit accepted an invalid record")
		}
	}
	if recs := listAll(t, s); len(recs) != 1 {
		t.Fatalf("%d records after failed appends, want 1", len(recs))
	}
}

// testAuditTwoHandles appends from two handles at once (two processes, or two
// replicas) and checks they build one gap-free chain.
func testAuditTwoHandles(t *testing.T, open Opener) {
	s1, s2 := mustOpen(t, open), mustOpen(t, open)
	ctx := t.Context()
	const workers, each = 4, 25
	var mu sync.Mutex
	var returned []audit.Record
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*each)
	for h, s := range []store.Store{s1, s2} {
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					n := 1 + i%3 // batches of 1 to 3
					batch := make([]audit.Record, n)
					for j := range batch {
						batch[j] = newRecord(fmt.Sprintf("h%d-w%d-%d-%d", h, w, i, j), i)
					}
					out, err := s.AppendAudit(ctx, batch)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					returned = append(returned, out...)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("AppendAudit: %v", err)
	}
	stored := listAll(t, s1)
	if len(stored) != len(returned) {
		t.Fatalf("%d records stored, %d returned", len(stored), len(returned))
	}
	for _, r := range returned {
		if !equalRecords(stored[r.Seq-1], r) {
			t.Fatalf("returned %+v, stored %+v", r, stored[r.Seq-1])
		}
	}
	seq, hash, err := s2.AuditHead(ctx)
	if err != nil || seq != int64(len(stored)) || !bytes.Equal(hash, stored[len(stored)-1].Hash) {
		t.Fatalf("AuditHead = %d, %x, %v", seq, hash, err)
	}
}

func testAuditList(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	var batch []audit.Record
	for i := range 10 {
		batch = append(batch, newRecord(fmt.Sprint(i), i))
	}
	if _, err := s.AppendAudit(ctx, batch); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		after    int64
		limit    int
		wantSeqs []int64
	}{
		{0, 3, []int64{1, 2, 3}},
		{3, 3, []int64{4, 5, 6}},
		{8, 5, []int64{9, 10}},
		{10, 5, nil},
		{7, 0, []int64{8, 9, 10}},
		{-5, 1, []int64{1}},
	}
	for _, tt := range tests {
		recs, err := s.ListAudit(ctx, tt.after, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, r := range recs {
			seqs = append(seqs, r.Seq)
		}
		if !slices.Equal(seqs, tt.wantSeqs) {
			t.Errorf("ListAudit(%d, %d) seqs = %v, want %v", tt.after, tt.limit, seqs, tt.wantSeqs)
		}
	}
	// A page verifies against the hash before it.
	first, _ := s.ListAudit(ctx, 0, 4)
	rest, _ := s.ListAudit(ctx, 4, 0)
	if err := audit.VerifyChain(first[3].Hash, rest); err != nil {
		t.Fatal(err)
	}
}

func testNextSequence(t *testing.T, open Opener) {
	s1, s2 := mustOpen(t, open), mustOpen(t, open)
	ctx := t.Context()
	for want := int64(1); want <= 3; want++ {
		if got, err := s1.NextSequence(ctx, "revocations"); err != nil || got != want {
			t.Fatalf("NextSequence = %d, %v; want %d", got, err, want)
		}
	}
	if got, err := s1.NextSequence(ctx, "other"); err != nil || got != 1 {
		t.Fatalf("NextSequence(other) = %d, %v; want 1 (counters are independent)", got, err)
	}
	if _, err := s1.NextSequence(ctx, ""); err == nil {
		t.Fatal("NextSequence(\"\") succeeded")
	}
	// Concurrent from two handles: every value handed out once, no gaps.
	const n = 40
	vals := make(chan int64, n)
	var wg sync.WaitGroup
	for i := range n {
		s := []store.Store{s1, s2}[i%2]
		wg.Go(func() {
			v, err := s.NextSequence(ctx, "revocations")
			if err != nil {
				t.Error(err)
			}
			vals <- v
		})
	}
	wg.Wait()
	close(vals)
	var got []int64
	for v := range vals {
		got = append(got, v)
	}
	slices.Sort(got)
	for i, v := range got {
		if v != int64(4+i) {
			t.Fatalf("concurrent NextSequence values %v, want 4..%d once each", got, 3+n)
		}
	}
}

func testReopen(t *testing.T, open Opener) {
	ctx := t.Context()
	s, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k := NewKey(t, "k1", base())
	k.ActivateAt = ptr(base().Add(time.Hour))
	if err := s.CreateKey(ctx, k, nil); err != nil {
		t.Fatal(err)
	}
	out, err := s.AppendAudit(ctx, []audit.Record{newRecord("a", 1), newRecord("b", 2)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.NextSequence(ctx, "revocations"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, open)
	checkKeys(t, s, []jwks.KeyRecord{k})
	if stored := listAll(t, s); !slices.EqualFunc(stored, out, equalRecords) {
		t.Fatalf("after reopen: %+v, want %+v", stored, out)
	}
	if v, err := s.NextSequence(ctx, "revocations"); err != nil || v != 2 {
		t.Fatalf("NextSequence after reopen = %d, %v; want 2", v, err)
	}
	// The chain continues from the stored head.
	more, err := s.AppendAudit(ctx, []audit.Record{newRecord("c", 3)})
	if err != nil {
		t.Fatal(err)
	}
	if more[0].Seq != 3 || !bytes.Equal(more[0].PrevHash, out[1].Hash) {
		t.Fatalf("append after reopen: seq %d prev %x", more[0].Seq, more[0].PrevHash)
	}
	listAll(t, s)
}

func testContextCanceled(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.CreateKey(ctx, NewKey(t, "k1", base()), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("CreateKey = %v, want context.Canceled", err)
	}
	if _, err := s.AppendAudit(ctx, []audit.Record{newRecord("a", 1)}); !errors.Is(err, context.Canceled) {
		t.Errorf("AppendAudit = %v, want context.Canceled", err)
	}
	if _, err := s.NextSequence(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("NextSequence = %v, want context.Canceled", err)
	}
	called := false
	err := s.UpdateKeys(ctx, func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) { called = true; return recs, nil })
	if !errors.Is(err, context.Canceled) || called {
		t.Errorf("UpdateKeys = %v (fn called: %v), want context.Canceled before fn", err, called)
	}
	if _, err := s.ListKeys(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ListKeys = %v, want context.Canceled", err)
	}
	checkKeys(t, s, nil)
	if recs := listAll(t, s); len(recs) != 0 {
		t.Errorf("%d audit records written under a canceled context", len(recs))
	}
}

func testCreateKeyCheck(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	first := NewKey(t, "k1", base())
	if err := s.CreateKey(ctx, first, func(existing []jwks.KeyRecord) error {
		if len(existing) != 0 {
			t.Errorf("check saw %d records in an empty store", len(existing))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	refusal := errors.New("a rotation is already scheduled")
	var seen []string
	err := s.CreateKey(ctx, NewKey(t, "k2", base().Add(time.Second)), func(existing []jwks.KeyRecord) error {
		for _, r := range existing {
			seen = append(seen, r.KID)
		}
		return refusal
	})
	if err != refusal {
		t.Fatalf("CreateKey returned %v, want the check's error as is", err)
	}
	if len(seen) != 1 || seen[0] != "k1" {
		t.Fatalf("check saw %v, want [k1]", seen)
	}
	checkKeys(t, s, []jwks.KeyRecord{first})
}

func testAuditRefusesRevoked(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	if err := s.CreateKey(ctx, NewKey(t, "k1", base()), nil); err != nil {
		t.Fatal(err)
	}
	before := newRecord("before", 1) // base()+1ms
	if _, err := s.AppendAudit(ctx, []audit.Record{before}); err != nil {
		t.Fatal(err)
	}
	revokedAt := base().Add(time.Second)
	if err := s.UpdateKeys(ctx, func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error) {
		r := recs[0]
		r.RevokedAt, r.RevokeReason = &revokedAt, "compromise"
		return []jwks.KeyRecord{r}, nil
	}); err != nil {
		t.Fatal(err)
	}
	// A signature made before the revocation but committed after it would
	// be returned after RevokeKey returned, and its record would sit after
	// the revocation with a time before revoked_at: refused too.
	early := newRecord("early", 2)
	if _, err := s.AppendAudit(ctx, []audit.Record{early}); !errors.Is(err, store.ErrKeyRevoked) {
		t.Fatalf("a record timed before the revocation, appended after it: %v, want ErrKeyRevoked", err)
	}
	late := newRecord("late", 3)
	late.Time = revokedAt
	if _, err := s.AppendAudit(ctx, []audit.Record{late}); !errors.Is(err, store.ErrKeyRevoked) {
		t.Fatalf("a record by a revoked key: %v, want ErrKeyRevoked", err)
	}
	if !errors.Is(store.ErrKeyRevoked, audit.ErrRecordRejected) {
		t.Fatal("ErrKeyRevoked must wrap audit.ErrRecordRejected, so the batcher commits the other records of a batch")
	}
	if got := listAll(t, s); len(got) != 1 {
		t.Fatalf("%d records after refused appends, want 1", len(got))
	}
}

// testAuditRefusedRecord appends refused records between signed ones, in one
// batch and on their own: they chain like any record and list back with
// their outcome and reason.
func testAuditRefusedRecord(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	in := []audit.Record{newRecord("a", 1), newRefused("r1", 2), newRecord("b", 3)}
	in[2].Outcome = audit.OutcomeSigned // explicit and implicit signed records mix
	out, err := s.AppendAudit(ctx, in)
	if err != nil {
		t.Fatalf("AppendAudit(signed, refused, signed): %v", err)
	}
	alone, err := s.AppendAudit(ctx, []audit.Record{newRefused("r2", 4)})
	if err != nil {
		t.Fatalf("AppendAudit(refused): %v", err)
	}
	last, err := s.AppendAudit(ctx, []audit.Record{newRecord("c", 5)})
	if err != nil {
		t.Fatalf("AppendAudit(signed after refused): %v", err)
	}
	out = append(append(out, alone...), last...)
	in = append(in, newRefused("r2", 4), newRecord("c", 5))

	stored := listAll(t, s) // verifies the chain
	if !slices.EqualFunc(stored, out, equalRecords) {
		t.Fatalf("stored %+v\nreturned %+v", stored, out)
	}
	prev := audit.Genesis()
	for i, r := range stored {
		want := in[i]
		want.Seq, want.PrevHash = int64(i+1), prev
		want.Hash = want.ComputeHash(prev)
		if !equalRecords(r, want) {
			t.Errorf("record %d: stored %+v, want %+v", i+1, r, want)
		}
		prev = r.Hash
	}
	for _, i := range []int{1, 3} {
		r := stored[i]
		if r.Outcome != audit.OutcomeRefused || r.Reason != in[i].Reason || r.Reason == "" {
			t.Errorf("record %d: outcome %q reason %q, want %q %q", r.Seq, r.Outcome, r.Reason, audit.OutcomeRefused, in[i].Reason)
		}
		if r.KID != "" || r.Signature != "" {
			t.Errorf("refused record %d has kid %q signature %q", r.Seq, r.KID, r.Signature)
		}
		// The outcome is hashed: the same record marked signed hashes
		// differently.
		signed := r
		signed.Outcome, signed.Reason = audit.OutcomeSigned, ""
		if bytes.Equal(signed.ComputeHash(r.PrevHash), r.Hash) {
			t.Errorf("record %d: refused and signed hash alike", r.Seq)
		}
	}
	for _, i := range []int{0, 2, 4} {
		if r := stored[i]; outcome(r) != audit.OutcomeSigned || r.Reason != "" {
			t.Errorf("record %d: outcome %q reason %q, want signed", r.Seq, r.Outcome, r.Reason)
		}
	}
	seq, hash, err := s.AuditHead(ctx)
	if err != nil || seq != 5 || !bytes.Equal(hash, stored[4].Hash) {
		t.Fatalf("AuditHead = %d, %x, %v; want 5, %x", seq, hash, err, stored[4].Hash)
	}
	// A page starting at a refused record verifies against the hash before it.
	page, err := s.ListAudit(ctx, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 2 || page[0].Outcome != audit.OutcomeRefused {
		t.Fatalf("ListAudit(1, 2) = %+v", page)
	}
	if err := audit.VerifyChain(stored[0].Hash, page); err != nil {
		t.Fatal(err)
	}
}

// testAuditRefusedRevoked: a refused record signs nothing, so the revoked key
// check does not apply to it, while a signed record in the same batch is
// still checked.
func testAuditRefusedRevoked(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	createRevoked(t, s, "k1")
	if _, err := s.AppendAudit(ctx, []audit.Record{newRefused("r", 1)}); err != nil {
		t.Fatalf("a refused record with every key revoked: %v", err)
	}
	if _, err := s.AppendAudit(ctx, []audit.Record{newRefused("r2", 2), newRecord("late", 3)}); !errors.Is(err, store.ErrKeyRevoked) {
		t.Fatalf("a signature by a revoked key beside a refused record: %v, want ErrKeyRevoked", err)
	}
	if got := listAll(t, s); len(got) != 1 || got[0].Outcome != audit.OutcomeRefused {
		t.Fatalf("stored %+v, want the one refused record", got)
	}
}

// testAuditInvalidOutcome: the store refuses a record whose outcome is
// unknown or disagrees with its fields, and the whole batch with it.
func testAuditInvalidOutcome(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	if _, err := s.AppendAudit(ctx, []audit.Record{newRecord("a", 1)}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		rec  audit.Record
	}{
		{"unknown outcome", func() audit.Record { r := newRecord("x", 3); r.Outcome = "denied"; return r }()},
		{"unknown outcome, refused shape", func() audit.Record { r := newRefused("x", 3); r.Outcome = "REFUSED"; return r }()},
		{"signed with a reason", func() audit.Record { r := newRecord("x", 3); r.Reason = "unhashed"; return r }()},
		{"refused with a signature", func() audit.Record { r := newRefused("x", 3); r.Signature = "sig"; return r }()},
		{"refused with a kid", func() audit.Record { r := newRefused("x", 3); r.KID = "k1"; return r }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.AppendAudit(ctx, []audit.Record{newRefused("b", 2), tt.rec}); err == nil {
				t.Fatal("AppendAudit accepted it")
			}
		})
	}
	if recs := listAll(t, s); len(recs) != 1 {
		t.Fatalf("%d records after refused appends, want 1", len(recs))
	}
}

// DeleteAuditFrom deletes every audit record with Seq >= from the way
// someone with write access to the database could: directly, bypassing the
// store and any guard (trigger, rule, permission) that refuses deletes. A
// store implementation's test supplies it to RunTampering.
type DeleteAuditFrom func(ctx context.Context, from int64) error

// RunTampering runs the contract tests that need to tamper with the stored
// audit log behind the store's back. newStore returns, as for Run, an Opener
// for a fresh, empty store, and a DeleteAuditFrom acting on that same store.
func RunTampering(t *testing.T, newStore func(t *testing.T) (Opener, DeleteAuditFrom)) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener, del DeleteAuditFrom)
	}{
		{"AuditDeletedTailSeqNotReused", testAuditDeletedTailSeqNotReused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			open, del := newStore(t)
			tt.fn(t, open, del)
		})
	}
}

// testAuditDeletedTailSeqNotReused: deleting the last records and appending
// must not reuse their sequence numbers. AuditHead is a high-water mark (the
// last record ever appended), the next record chains from it, and the gap
// stays visible to VerifyChain; a reopened handle sees the same. Otherwise
// the rewritten tail would be a valid chain and a truncation undetectable.
func testAuditDeletedTailSeqNotReused(t *testing.T, open Opener, del DeleteAuditFrom) {
	ctx := t.Context()
	s := mustOpen(t, open)
	var in []audit.Record
	for i := range 7 {
		in = append(in, newRecord(fmt.Sprintf("r%d", i+1), i+1))
	}
	out, err := s.AppendAudit(ctx, in)
	if err != nil {
		t.Fatalf("AppendAudit: %v", err)
	}
	head := out[6]
	if err := del(ctx, 5); err != nil {
		t.Fatalf("deleting records 5..7: %v", err)
	}
	for _, h := range []store.Store{s, mustOpen(t, open)} {
		seq, hash, err := h.AuditHead(ctx)
		if err != nil || seq != 7 || !bytes.Equal(hash, head.Hash) {
			t.Fatalf("AuditHead after deleting records 5..7 = %d, %x, %v; want the high-water mark 7, %x", seq, hash, err, head.Hash)
		}
	}
	next, err := mustOpen(t, open).AppendAudit(ctx, []audit.Record{newRecord("r8", 8)})
	if err != nil {
		t.Fatalf("AppendAudit after deleting the tail: %v", err)
	}
	if next[0].Seq != 8 || !bytes.Equal(next[0].PrevHash, head.Hash) {
		t.Fatalf("after deleting records 5..7 the next record has seq %d and prev hash %x; want seq 8 chained to record 7's hash %x (a seq is never reused)",
			next[0].Seq, next[0].PrevHash, head.Hash)
	}
	recs, err := s.ListAudit(ctx, 0, 0)
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	var seqs []int64
	for _, r := range recs {
		seqs = append(seqs, r.Seq)
	}
	if !slices.Equal(seqs, []int64{1, 2, 3, 4, 8}) {
		t.Fatalf("stored seqs %v, want [1 2 3 4 8]", seqs)
	}
	var ce *audit.ChainError
	if err := audit.VerifyChain(audit.Genesis(), recs); !errors.As(err, &ce) || ce.Seq != 8 {
		t.Fatalf("VerifyChain over the log with a deleted middle = %v; want a break at seq 8", err)
	}
	if seq, hash, err := s.AuditHead(ctx); err != nil || seq != 8 || !bytes.Equal(hash, next[0].Hash) {
		t.Fatalf("AuditHead = %d, %x, %v; want 8, %x", seq, hash, err, next[0].Hash)
	}
}

// testAuditProvenance: a record's provenance is stored and returned as given,
// covered by its hash, and a provenance in any other encoding than
// audit.EncodeProvenance's is refused with nothing written.
func testAuditProvenance(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	signed := newRecord("oidc", 1)
	signed.Provenance = audit.EncodeProvenance(map[string]string{
		"iss": "https://token.actions.githubusercontent.com", "sub": "repo:acme/payments:ref:refs/tags/v1.2.0",
		"repository": "acme/payments", "run_id": "42", "note": "ünïcode <&> \"quoted\"",
	})
	refused := newRecord("refused", 2)
	refused.KID, refused.Alg, refused.Profile, refused.Signature = "", "", "", ""
	refused.Outcome, refused.Reason = audit.OutcomeRefused, "policy: claim repository"
	refused.Provenance = signed.Provenance
	out, err := s.AppendAudit(ctx, []audit.Record{signed, refused, newRecord("token", 3)})
	if err != nil {
		t.Fatalf("AppendAudit: %v", err)
	}
	stored := listAll(t, s)
	if !slices.EqualFunc(stored, out, equalRecords) {
		t.Fatalf("stored %+v\nreturned %+v", stored, out)
	}
	if stored[0].Provenance != signed.Provenance || stored[2].Provenance != "" {
		t.Fatalf("provenance stored as %q and %q", stored[0].Provenance, stored[2].Provenance)
	}
	if err := audit.VerifyChain(audit.Genesis(), stored); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"b":"1","a":"2"}`, `{"a": "1"}`, `{}`, `{"a":1}`, `not json`} {
		r := newRecord("bad", 4)
		r.Provenance = bad
		if _, err := s.AppendAudit(ctx, []audit.Record{r}); err == nil {
			t.Errorf("provenance %s accepted", bad)
		}
	}
	if got := listAll(t, s); len(got) != 3 {
		t.Fatalf("%d records after refused appends, want 3", len(got))
	}
}
