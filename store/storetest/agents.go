package storetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
)

// removeRecord is the audit record of the removal of the agent whose
// newest version is newest.
func removeRecord(newest store.AgentCard) (audit.Record, error) {
	return audit.Record{Time: time.Now(), Caller: "token:admin", Outcome: string(audit.KindAgentRemove), CanonicalSHA256: newest.CanonicalSHA256,
		Detail: audit.EncodeAgentDetail(audit.AgentDetail{Agent: newest.ID})}, nil
}

// revokeRecord is the audit record of the revocation of r.
func revokeRecord(r store.CardRevocation) audit.Record {
	sum := r.CanonicalSHA256
	if len(sum) != 32 {
		sum = make([]byte, 32)
	}
	return audit.Record{Time: time.Now(), Caller: "token:admin", Outcome: string(audit.KindCardRevoke), Reason: r.Reason, CanonicalSHA256: sum,
		Detail: audit.EncodeAgentDetail(audit.AgentDetail{Agent: r.AgentID, Version: r.Version})}
}

// revoke is RevokeCard with revokeRecord's record.
func revoke(s store.Store, t *testing.T, r store.CardRevocation) (store.CardRevocation, error) {
	out, _, err := s.RevokeCard(t.Context(), r, revokeRecord(r))
	return out, err
}

// AgentCard returns version n of a valid agent card of agent id, private,
// signed by k1 and k2.
func AgentCard(id string, n int) store.AgentCard {
	sum := sha256.Sum256([]byte(fmt.Sprint(id, n)))
	return store.AgentCard{
		ID: id, Visibility: store.Private,
		Input:           []byte(fmt.Sprintf(`{"name":"%s","version":"1.%d.0"}`, id, n)),
		Options:         []byte(`{"strip_unknown":true}`),
		Signed:          []byte(fmt.Sprintf(`{"name":"%s","version":"1.%d.0","signatures":[]}`, id, n)),
		CanonicalSHA256: sum[:], KIDs: []string{"k1", "k2"}, Caller: "token:ci", AuditSeq: int64(n),
	}
}

func sameAgentCard(a, b store.AgentCard) bool {
	return a.ID == b.ID && a.Version == b.Version && a.Visibility == b.Visibility && bytes.Equal(a.Input, b.Input) &&
		bytes.Equal(a.Options, b.Options) && bytes.Equal(a.Signed, b.Signed) && bytes.Equal(a.CanonicalSHA256, b.CanonicalSHA256) &&
		slices.Equal(a.KIDs, b.KIDs) && a.Caller == b.Caller && a.AuditSeq == b.AuditSeq && a.StoredAt.Equal(b.StoredAt)
}

func versions(cards []store.AgentCard) []int64 {
	out := make([]int64, len(cards))
	for i, c := range cards {
		out[i] = c.Version
	}
	return out
}

// testAgents: versions grow by one per put, older ones beyond keep are
// dropped, the newest is what AgentCard(id, 0) and ListAgents return, and a
// removed agent starts again after its last version.
func testAgents(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	var last store.AgentCard
	for n := 1; n <= 3; n++ {
		c, err := s.PutAgentCard(ctx, AgentCard("payments", n), 2)
		if err != nil {
			t.Fatal(err)
		}
		if c.Version != int64(n) || c.StoredAt.IsZero() {
			t.Fatalf("put %d: version %d, stored at %v", n, c.Version, c.StoredAt)
		}
		last = c
	}
	got, err := s.AgentCard(ctx, "payments", 0)
	if err != nil || !sameAgentCard(got, last) {
		t.Fatalf("newest = %+v, %v; want %+v", got, err, last)
	}
	if v2, err := s.AgentCard(ctx, "payments", 2); err != nil || v2.Version != 2 {
		t.Fatalf("version 2: %+v, %v", v2, err)
	}
	if _, err := s.AgentCard(ctx, "payments", 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("version 1 beyond keep 2: err = %v, want ErrNotFound", err)
	}
	hist, err := s.AgentHistory(ctx, "payments")
	if err != nil || !slices.Equal(versions(hist), []int64{3, 2}) {
		t.Fatalf("history = %v, %v; want versions 3, 2", versions(hist), err)
	}
	pub := AgentCard("billing", 1)
	pub.Visibility = store.Public
	pub.KIDs = nil
	if _, err := s.PutAgentCard(ctx, pub, 0); err != nil {
		t.Fatal(err)
	}
	// Private and unknown agents look the same through PublicAgentCard.
	if got, err := s.PublicAgentCard(ctx, "billing"); err != nil || got.ID != "billing" || got.Visibility != store.Public {
		t.Fatalf("PublicAgentCard(billing) = %+v, %v", got, err)
	}
	_, errPrivate := s.PublicAgentCard(ctx, "payments")
	_, errUnknown := s.PublicAgentCard(ctx, "paymentz")
	if !errors.Is(errPrivate, store.ErrNotFound) || !errors.Is(errUnknown, store.ErrNotFound) ||
		strings.Replace(errPrivate.Error(), "payments", "paymentz", 1) != errUnknown.Error() {
		t.Fatalf("PublicAgentCard of a private agent: %v; of an unknown one: %v; want the same ErrNotFound", errPrivate, errUnknown)
	}
	list, err := s.ListAgents(ctx, "", 0)
	if err != nil || len(list) != 2 || list[0].ID != "billing" || list[1].ID != "payments" || list[1].Version != 3 ||
		list[0].Visibility != store.Public || len(list[0].KIDs) != 0 {
		t.Fatalf("ListAgents = %+v, %v", list, err)
	}
	if page, err := s.ListAgents(ctx, "billing", 1); err != nil || len(page) != 1 || page[0].ID != "payments" {
		t.Fatalf("ListAgents after billing = %+v, %v", page, err)
	}

	if _, err := s.RemoveAgent(ctx, "payments", removeRecord); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AgentCard(ctx, "payments", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("removed agent: err = %v, want ErrNotFound", err)
	}
	if _, err := s.AgentHistory(ctx, "payments"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("removed agent's history: err = %v, want ErrNotFound", err)
	}
	if _, err := s.RemoveAgent(ctx, "payments", removeRecord); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("removing again: err = %v, want ErrNotFound", err)
	}
	stale := AgentCard("payments", 4)
	stale.Replaces = 3
	if _, err := s.PutAgentCard(ctx, stale, 2); !errors.Is(err, store.ErrSuperseded) {
		t.Fatalf("a put replacing version 3 of a removed agent: err = %v, want ErrSuperseded", err)
	}
	again, err := s.PutAgentCard(ctx, AgentCard("payments", 4), 2)
	if err != nil || again.Version != 4 {
		t.Fatalf("put after remove: version %d, %v; want 4 (versions are never reused)", again.Version, err)
	}
	for _, tc := range []struct {
		replaces int64
		ok       bool
	}{{3, false}, {4, true}, {4, false}} {
		c := AgentCard("payments", 5)
		c.Replaces = tc.replaces
		_, err := s.PutAgentCard(ctx, c, 2)
		if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, store.ErrSuperseded)) {
			t.Fatalf("a put replacing version %d: err = %v, want ok %v", tc.replaces, err, tc.ok)
		}
	}

	// Paging in byte order whatever the database's collation: punctuation
	// sorts differently in natural-language collations.
	for _, id := range []string{"a-c", "a.b", "a_z", "ab", "b"} {
		if _, err := s.PutAgentCard(ctx, AgentCard(id, 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	var paged []string
	for after := ""; ; {
		page, err := s.ListAgents(ctx, after, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page[0].ID)
		after = page[0].ID
	}
	if want := []string{"a-c", "a.b", "a_z", "ab", "b", "billing", "payments"}; !slices.Equal(paged, want) {
		t.Fatalf("paging one at a time: %v, want %v", paged, want)
	}

	for name, c := range map[string]store.AgentCard{
		"empty id":      func() store.AgentCard { c := AgentCard("x", 1); c.ID = ""; return c }(),
		"upper case id": func() store.AgentCard { c := AgentCard("x", 1); c.ID = "Payments"; return c }(),
		"slash in id":   func() store.AgentCard { c := AgentCard("x", 1); c.ID = "a/b"; return c }(),
		"visibility":    func() store.AgentCard { c := AgentCard("x", 1); c.Visibility = "secret"; return c }(),
		"no signed":     func() store.AgentCard { c := AgentCard("x", 1); c.Signed = nil; return c }(),
		"short sha":     func() store.AgentCard { c := AgentCard("x", 1); c.CanonicalSHA256 = []byte{1}; return c }(),
	} {
		if _, err := s.PutAgentCard(ctx, c, 0); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := s.AgentCard(ctx, "x", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused put left agent x behind: %v", err)
	}
}

// testPublicAgentCard: PublicAgentCard answers an agent's newest version
// only, and only when that version is public: an older public version of an
// agent now private is not served, nor is a removed agent's.
func testPublicAgentCard(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	put := func(id string, n int, vis store.Visibility) {
		t.Helper()
		c := AgentCard(id, n)
		c.Visibility = vis
		if _, err := s.PutAgentCard(ctx, c, 0); err != nil {
			t.Fatal(err)
		}
	}
	put("status", 1, store.Public)
	put("status", 2, store.Public)
	put("docs", 1, store.Public)
	put("docs", 2, store.Private)
	put("old", 1, store.Public)
	if _, err := s.RemoveAgent(ctx, "old", removeRecord); err != nil {
		t.Fatal(err)
	}
	if got, err := s.PublicAgentCard(ctx, "status"); err != nil || got.Version != 2 || got.Visibility != store.Public {
		t.Fatalf("PublicAgentCard(status) = version %d %s, %v; want version 2, public", got.Version, got.Visibility, err)
	}
	for _, id := range []string{"docs", "old", "nobody"} {
		if got, err := s.PublicAgentCard(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("PublicAgentCard(%s) = version %d, %v; want ErrNotFound", id, got.Version, err)
		}
	}
	put("docs", 3, store.Public)
	if got, err := s.PublicAgentCard(ctx, "docs"); err != nil || got.Version != 3 {
		t.Fatalf("PublicAgentCard(docs) after a public version 3 = version %d, %v", got.Version, err)
	}
}

// testAgentsConcurrent: puts for one agent through two handles at once take
// consecutive versions, none lost or repeated.
func testAgentsConcurrent(t *testing.T, open Opener) {
	a, b := mustOpen(t, open), mustOpen(t, open)
	ctx := t.Context()
	const each = 10
	var mu sync.Mutex
	var got []int64
	var wg sync.WaitGroup
	for _, s := range []store.Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range each {
				c, err := s.PutAgentCard(ctx, AgentCard("shared", n), 0)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, c.Version)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(got)
	for i, v := range got {
		if v != int64(i+1) {
			t.Fatalf("versions %v: want 1..%d, each once", got, 2*each)
		}
	}
	hist, err := a.AgentHistory(ctx, "shared")
	if err != nil || len(hist) != 2*each {
		t.Fatalf("history holds %d versions, %v; want %d", len(hist), err, 2*each)
	}
}

// testRevokedCards: a card revocation is stored once (a second keeps the
// first), listed by canonical SHA-256, and outlives the agent it names.
func testRevokedCards(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	if got, err := s.RevokedCards(ctx); err != nil || len(got) != 0 {
		t.Fatalf("RevokedCards on an empty store = %v, %v", got, err)
	}
	c, err := s.PutAgentCard(ctx, AgentCard("payments", 1), 1)
	if err != nil {
		t.Fatal(err)
	}
	first, err := revoke(s, t, store.CardRevocation{CanonicalSHA256: c.CanonicalSHA256, AgentID: c.ID, Version: c.Version, Reason: "leaked"})
	if err != nil || first.RevokedAt.IsZero() || first.Reason != "leaked" {
		t.Fatalf("RevokeCard = %+v, %v", first, err)
	}
	again, err := revoke(s, t, store.CardRevocation{CanonicalSHA256: c.CanonicalSHA256, AgentID: c.ID, Version: c.Version, Reason: "other"})
	if err != nil || again.Reason != "leaked" || !again.RevokedAt.Equal(first.RevokedAt) {
		t.Fatalf("revoking again = %+v, %v; want the first revocation kept", again, err)
	}
	other := AgentCard("billing", 7)
	if _, err := revoke(s, t, store.CardRevocation{CanonicalSHA256: other.CanonicalSHA256, AgentID: "billing", Version: 2, Reason: "decommissioned"}); err != nil {
		t.Fatal(err)
	}
	if _, err := revoke(s, t, store.CardRevocation{CanonicalSHA256: []byte{1}}); err == nil {
		t.Fatal("a 1-byte SHA-256 was accepted")
	}
	// Newer versions drop the revoked one (keep 1), then the agent goes:
	// the revocation stays.
	if _, err := s.PutAgentCard(ctx, AgentCard("payments", 2), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RemoveAgent(ctx, "payments", removeRecord); err != nil {
		t.Fatal(err)
	}
	got, err := s.RevokedCards(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("RevokedCards = %+v, %v; want 2", got, err)
	}
	if bytes.Compare(got[0].CanonicalSHA256, got[1].CanonicalSHA256) >= 0 {
		t.Fatal("RevokedCards is not ordered by canonical SHA-256")
	}
	for _, r := range got {
		if bytes.Equal(r.CanonicalSHA256, c.CanonicalSHA256) && (r.AgentID != "payments" || r.Version != 1 || r.Reason != "leaked" || !r.RevokedAt.Equal(first.RevokedAt)) {
			t.Fatalf("the payments revocation came back as %+v", r)
		}
	}
}

// testAgentCounts: CountAgents counts live agents, and a caller's by the
// newest version not signed by skip: a re-signature keeps an agent its
// registrant's, a removed agent counts for no one.
func testAgentCounts(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	const skip = "registry"
	put := func(id, caller string) {
		t.Helper()
		c := AgentCard(id, 1)
		c.Caller = caller
		if _, err := s.PutAgentCard(ctx, c, 2); err != nil {
			t.Fatal(err)
		}
	}
	count := func(step, caller string, wantTotal, wantBy int64) {
		t.Helper()
		total, by, err := s.CountAgents(ctx, caller, skip)
		if err != nil || total != wantTotal || by != wantBy {
			t.Fatalf("%s: CountAgents(%q) = %d, %d, %v; want %d, %d", step, caller, total, by, err, wantTotal, wantBy)
		}
	}
	count("empty", "token:a", 0, 0)
	put("one", "token:a")
	put("two", "token:b")
	put("three", "token:a")
	count("three agents", "token:a", 3, 2)
	count("three agents", "token:b", 3, 1)
	put("three", skip) // re-signed: still token:a's
	put("three", skip) // the registrant's version is no longer kept
	count("re-signed", "token:a", 3, 1)
	count("re-signed", skip, 3, 0)
	put("two", "token:a") // registered again by another caller: now its
	count("registered again", "token:a", 3, 2)
	count("registered again", "token:b", 3, 0)
	if _, err := s.RemoveAgent(ctx, "one", removeRecord); err != nil {
		t.Fatal(err)
	}
	count("removed", "token:a", 2, 1)
}

// testRegistryAdminAudited: RemoveAgent and RevokeCard append their audit
// record in the action's transaction: the record (made by RemoveAgent's
// callback from the newest version the transaction reads) is in the chain
// and the log when the call returns, and a record that is refused, or a
// callback error, leaves the action undone.
func testRegistryAdminAudited(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ctx := t.Context()
	for n := 1; n <= 3; n++ {
		if _, err := s.PutAgentCard(ctx, AgentCard("payments", n), 2); err != nil {
			t.Fatal(err)
		}
	}
	head := func() int64 {
		t.Helper()
		seq, _, err := s.AuditHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	undone := func(step string, before int64) {
		t.Helper()
		if got := head(); got != before {
			t.Fatalf("%s: the audit head moved from %d to %d", step, before, got)
		}
		if _, err := s.AgentCard(ctx, "payments", 0); err != nil {
			t.Fatalf("%s: the agent is gone: %v", step, err)
		}
		if revs, err := s.RevokedCards(ctx); err != nil || len(revs) != 0 {
			t.Fatalf("%s: revoked cards %+v, %v; want none", step, revs, err)
		}
	}
	appended := func(step string, rec audit.Record, kind audit.Kind, seq int64) {
		t.Helper()
		if rec.Seq != seq || rec.Kind() != kind || len(rec.Hash) == 0 {
			t.Fatalf("%s: record %+v; want a %s record with seq %d", step, rec, kind, seq)
		}
		listed, err := s.ListAudit(ctx, seq-1, 1)
		if err != nil || len(listed) != 1 || !equalRecords(listed[0], rec) || head() != seq {
			t.Fatalf("%s: listed %+v, %v; head %d; want the record returned, %+v", step, listed, err, head(), rec)
		}
		if entries, err := s.LogEntries(ctx, seq-1, seq); err != nil || len(entries) != 1 {
			t.Fatalf("%s: the record's log entry: %d, %v", step, len(entries), err)
		}
	}

	before := head()
	refused := errors.New("refused by the caller")
	if _, err := s.RemoveAgent(ctx, "payments", func(store.AgentCard) (audit.Record, error) { return audit.Record{}, refused }); !errors.Is(err, refused) {
		t.Fatalf("RemoveAgent with a failing record: %v, want the callback's error", err)
	}
	undone("a failing record", before)
	wrongKind := revokeRecord(store.CardRevocation{CanonicalSHA256: AgentCard("payments", 3).CanonicalSHA256, AgentID: "payments", Version: 3, Reason: "leaked"})
	if _, err := s.RemoveAgent(ctx, "payments", func(store.AgentCard) (audit.Record, error) { return wrongKind, nil }); err == nil {
		t.Fatal("RemoveAgent with a card.revoke record: no error")
	}
	undone("a removal with a card.revoke record", before)
	noDetail := wrongKind
	noDetail.Detail = ""
	rev := store.CardRevocation{CanonicalSHA256: AgentCard("payments", 3).CanonicalSHA256, AgentID: "payments", Version: 3, Reason: "leaked"}
	if _, _, err := s.RevokeCard(ctx, rev, noDetail); err == nil {
		t.Fatal("RevokeCard with a record without its detail: no error")
	}
	rm, _ := removeRecord(AgentCard("payments", 3))
	if _, _, err := s.RevokeCard(ctx, rev, rm); err == nil {
		t.Fatal("RevokeCard with an agent.remove record: no error")
	}
	undone("refused revocation records", before)

	got, rec, err := s.RevokeCard(ctx, rev, revokeRecord(rev))
	if err != nil || got.Reason != "leaked" {
		t.Fatalf("RevokeCard = %+v, %v", got, err)
	}
	appended("a revocation", rec, audit.KindCardRevoke, before+1)
	if _, rec, err = s.RevokeCard(ctx, rev, revokeRecord(rev)); err != nil {
		t.Fatal(err)
	}
	appended("a revocation of a revoked card", rec, audit.KindCardRevoke, before+2)

	var seen store.AgentCard
	rec, err = s.RemoveAgent(ctx, "payments", func(newest store.AgentCard) (audit.Record, error) {
		seen = newest
		return removeRecord(newest)
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen.Version != 3 || !bytes.Equal(rec.CanonicalSHA256, AgentCard("payments", 3).CanonicalSHA256) {
		t.Fatalf("the removal's record was made from version %d (SHA %x); want the newest, 3", seen.Version, rec.CanonicalSHA256)
	}
	appended("a removal", rec, audit.KindAgentRemove, before+3)
	if _, err := s.AgentCard(ctx, "payments", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the removed agent: %v", err)
	}
	if _, err := s.RemoveAgent(ctx, "payments", removeRecord); !errors.Is(err, store.ErrNotFound) || head() != before+3 {
		t.Fatalf("removing an agent with no version: %v, head %d; want ErrNotFound and no record", err, head())
	}
}
