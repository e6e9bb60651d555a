package storetest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
)

// The contract of store.Approvals, run by Run: signatures held for
// approval and the approvers' votes, each step audited in its transaction.

// approval is a valid new approval of requester, expiring in ttl.
func approval(id, requester string, required int, ttl time.Duration) store.Approval {
	sum := sha256.Sum256([]byte("card " + id))
	return store.Approval{
		ID: id, ExpiresAt: time.Now().Add(ttl), Requester: requester, RequestID: "req-" + id, Rule: "new-host", Required: required,
		CanonicalSHA256: sum[:], CardName: "Orders", CardVersion: "2", AgentID: "orders", Request: []byte(`{"name":"Orders"}`),
		Diff: `{"first":false,"hosts_added":["eu.orders.example.com"]}`,
	}
}

// approvalRecord is a's audit record of kind by caller.
func approvalRecord(a store.Approval, kind audit.Kind, caller string) audit.Record {
	return audit.Record{Time: time.Now(), Caller: caller, RequestID: "r", CanonicalSHA256: a.CanonicalSHA256, Outcome: string(kind),
		Detail: audit.EncodeApprovalDetail(audit.ApprovalDetail{ID: a.ID, Rule: a.Rule, Approvals: a.Approvals(), Required: a.Required, Expires: audit.ApprovalExpiry(a.ExpiresAt)})}
}

// voteRecord makes a vote's record, as VoteApproval's record function.
func voteRecord(caller string, approve bool) func(store.Approval) (audit.Record, error) {
	kind := audit.KindApprovalDeny
	if approve {
		kind = audit.KindApprovalApprove
	}
	return func(after store.Approval) (audit.Record, error) { return approvalRecord(after, kind, caller), nil }
}

func create(t *testing.T, s store.Store, a store.Approval) store.Approval {
	t.Helper()
	got, rec, err := s.CreateApproval(t.Context(), a, approvalRecord(a, audit.KindApprovalRequest, a.Requester))
	if err != nil {
		t.Fatalf("CreateApproval(%s): %v", a.ID, err)
	}
	if got.State != store.ApprovalPending || got.CreatedAt.IsZero() || got.Seq != rec.Seq || rec.Seq == 0 || rec.Kind() != audit.KindApprovalRequest {
		t.Fatalf("CreateApproval(%s) = %+v, record %+v", a.ID, got, rec)
	}
	return got
}

func ids(list []store.Approval) string {
	var out []string
	for _, a := range list {
		out = append(out, a.ID)
	}
	return strings.Join(out, " ")
}

func testApprovals(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	other := mustOpen(t, open) // another replica
	ctx := t.Context()
	a := create(t, s, approval("apr_a", "token:ci", 2, time.Hour))
	if _, _, err := s.CreateApproval(ctx, approval("apr_a", "token:ci", 1, time.Hour), approvalRecord(a, audit.KindApprovalRequest, "token:ci")); !errors.Is(err, store.ErrExists) {
		t.Fatalf("the same id again: %v; want ErrExists", err)
	}
	for _, bad := range []struct {
		field string
		edit  func(*store.Approval)
	}{
		{"id", func(x *store.Approval) { x.ID = "a b" }},
		{"requester", func(x *store.Approval) { x.Requester = "" }},
		{"required", func(x *store.Approval) { x.Required = 0 }},
		{"canonical_sha256", func(x *store.Approval) { x.CanonicalSHA256 = x.CanonicalSHA256[:5] }},
		{"request", func(x *store.Approval) { x.Request = nil }},
		{"expires_at", func(x *store.Approval) { x.ExpiresAt = time.Time{} }},
	} {
		x := approval("apr_bad", "token:ci", 1, time.Hour)
		bad.edit(&x)
		if _, _, err := s.CreateApproval(ctx, x, approvalRecord(x, audit.KindApprovalRequest, "token:ci")); err == nil || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("an approval with a bad %s: %v; want an error naming it", bad.field, err)
		}
	}
	if _, _, err := s.CreateApproval(ctx, approval("apr_kind", "token:ci", 1, time.Hour), approvalRecord(a, audit.KindApprovalApprove, "token:ci")); err == nil {
		t.Error("a request stored with an approval.approve record")
	}
	b := create(t, other, approval("apr_b", "token:other", 1, time.Hour))
	c := create(t, s, approval("apr_c", "token:ci", 1, time.Hour))

	// Votes: the requester never; once each; the Required-th approves.
	if _, _, err := other.VoteApproval(ctx, a.ID, store.Vote{Approver: "token:ci", Approve: true}, voteRecord("token:ci", true)); !errors.Is(err, store.ErrSelfApproval) {
		t.Fatalf("the requester's vote: %v; want ErrSelfApproval", err)
	}
	after, rec, err := other.VoteApproval(ctx, a.ID, store.Vote{Approver: "token:alice", Approve: true, Reason: "ok"}, voteRecord("token:alice", true))
	if err != nil || after.State != store.ApprovalPending || after.Approvals() != 1 || rec.Kind() != audit.KindApprovalApprove || after.Votes[0].Seq != rec.Seq || after.Votes[0].Time.IsZero() {
		t.Fatalf("alice's vote = %+v, %+v, %v", after, rec, err)
	}
	if _, _, err := s.VoteApproval(ctx, a.ID, store.Vote{Approver: "token:alice", Approve: true}, voteRecord("token:alice", true)); !errors.Is(err, store.ErrDuplicateVote) {
		t.Fatalf("alice again: %v; want ErrDuplicateVote", err)
	}
	boom := errors.New("boom")
	if _, _, err := s.VoteApproval(ctx, a.ID, store.Vote{Approver: "token:bob", Approve: true}, func(store.Approval) (audit.Record, error) { return audit.Record{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("a record error: %v; want it returned", err)
	}
	if after, _, err = s.VoteApproval(ctx, a.ID, store.Vote{Approver: "token:bob", Approve: true}, voteRecord("token:bob", true)); err != nil || after.State != store.ApprovalApproved || after.Approvals() != 2 {
		t.Fatalf("bob's vote = %+v, %v; want approved", after, err)
	}
	if _, _, err := s.VoteApproval(ctx, a.ID, store.Vote{Approver: "token:carol", Approve: true}, voteRecord("token:carol", true)); !errors.Is(err, store.ErrApprovalClosed) {
		t.Fatalf("a vote on an approved request: %v; want ErrApprovalClosed", err)
	}
	if after, _, err = s.VoteApproval(ctx, b.ID, store.Vote{Approver: "token:alice", Approve: false, Reason: "no"}, voteRecord("token:alice", false)); err != nil || after.State != store.ApprovalDenied {
		t.Fatalf("a denial = %+v, %v", after, err)
	}
	if _, _, err := s.VoteApproval(ctx, b.ID, store.Vote{Approver: "token:bob", Approve: true}, voteRecord("token:bob", true)); !errors.Is(err, store.ErrApprovalClosed) {
		t.Fatalf("a vote on a denied request: %v; want ErrApprovalClosed", err)
	}
	if _, _, err := s.VoteApproval(ctx, "apr_none", store.Vote{Approver: "token:bob", Approve: true}, voteRecord("token:bob", true)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a vote on no request: %v; want ErrNotFound", err)
	}

	// Read back on the other handle, votes in order.
	got, err := other.Approval(ctx, a.ID)
	if err != nil || got.State != store.ApprovalApproved || len(got.Votes) != 2 || got.Votes[0].Approver != "token:alice" || got.Votes[0].Reason != "ok" ||
		got.Votes[1].Approver != "token:bob" || string(got.Request) != `{"name":"Orders"}` || got.Diff != a.Diff || !got.CreatedAt.Equal(a.CreatedAt) || got.Seq != a.Seq {
		t.Fatalf("Approval(%s) = %+v, %v", a.ID, got, err)
	}
	if !got.ExpiresAt.Round(time.Millisecond).Equal(a.ExpiresAt.Round(time.Millisecond)) {
		t.Errorf("expires %s, stored %s", got.ExpiresAt, a.ExpiresAt)
	}
	if _, err := other.Approval(ctx, "apr_none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Approval of no id: %v", err)
	}
	if _, err := other.ListApprovals(ctx, store.ApprovalFilter{State: store.ApprovalPending}); err == nil {
		t.Error("listing pending approvals without the time that decides expiry")
	}
	for _, tc := range []struct {
		f    store.ApprovalFilter
		want string
	}{
		{store.ApprovalFilter{}, "apr_c apr_b apr_a"},
		{store.ApprovalFilter{State: store.ApprovalPending, Now: time.Now()}, "apr_c"},
		{store.ApprovalFilter{State: store.ApprovalApproved, Now: time.Now()}, "apr_a"},
		{store.ApprovalFilter{State: store.ApprovalDenied}, "apr_b"},
		{store.ApprovalFilter{State: store.ApprovalExpired, Now: time.Now()}, ""},
		// Two hours on, every approval not denied has expired.
		{store.ApprovalFilter{State: store.ApprovalExpired, Now: time.Now().Add(2 * time.Hour)}, "apr_c apr_a"},
		{store.ApprovalFilter{State: store.ApprovalPending, Now: time.Now().Add(2 * time.Hour)}, ""},
		{store.ApprovalFilter{Requester: "token:ci"}, "apr_c apr_a"},
		{store.ApprovalFilter{Limit: 2}, "apr_c apr_b"},
		{store.ApprovalFilter{Before: "apr_b"}, "apr_a"},
		{store.ApprovalFilter{State: store.ApprovalDenied, Requester: "token:ci"}, ""},
	} {
		list, err := other.ListApprovals(ctx, tc.f)
		if err != nil || ids(list) != tc.want {
			t.Errorf("ListApprovals(%+v) = %q, %v; want %q", tc.f, ids(list), err, tc.want)
		}
		for _, x := range list {
			if x.ID == a.ID && len(x.Votes) != 2 {
				t.Errorf("ListApprovals: %s with %d votes, want 2", x.ID, len(x.Votes))
			}
		}
	}
	_ = c

	// Every step in the audit chain.
	recs, err := s.ListAudit(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, r := range recs {
		steps = append(steps, string(r.Kind())+" "+r.Caller)
	}
	want := "approval.request token:ci|approval.request token:other|approval.request token:ci|approval.approve token:alice|approval.approve token:bob|approval.deny token:alice"
	if strings.Join(steps, "|") != want {
		t.Fatalf("audit records:\n%s\nwant\n%s", strings.Join(steps, "|"), want)
	}
}

func testApprovalExpiry(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	a := create(t, s, approval("apr_short", "token:ci", 1, 300*time.Millisecond))
	time.Sleep(400 * time.Millisecond)
	_, _, err := s.VoteApproval(t.Context(), a.ID, store.Vote{Approver: "token:alice", Approve: true}, voteRecord("token:alice", true))
	if !errors.Is(err, store.ErrApprovalClosed) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("a vote after expiry: %v; want ErrApprovalClosed, expired", err)
	}
	got, err := s.Approval(t.Context(), a.ID)
	if err != nil || got.State != store.ApprovalPending || !got.Expired(time.Now()) || len(got.Votes) != 0 {
		t.Fatalf("expired approval = %+v, %v", got, err)
	}
}

// testApprovalVotesRace: eight approvers on two handles vote at once on a
// request needing three: exactly three count, and the request becomes
// approved exactly once.
func testApprovalVotesRace(t *testing.T, open Opener) {
	handles := []store.Store{mustOpen(t, open), mustOpen(t, open)}
	a := create(t, handles[0], approval("apr_race", "token:ci", 3, time.Hour))
	var wg sync.WaitGroup
	var mu sync.Mutex
	counted, closed, approvedBy := 0, 0, 0
	for i := range 8 {
		wg.Go(func() {
			who := fmt.Sprintf("token:approver-%d", i)
			after, _, err := handles[i%2].VoteApproval(t.Context(), a.ID, store.Vote{Approver: who, Approve: true}, voteRecord(who, true))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				counted++
				if after.State == store.ApprovalApproved {
					approvedBy++
				}
			case errors.Is(err, store.ErrApprovalClosed):
				closed++
			default:
				t.Errorf("vote %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	got, err := handles[1].Approval(t.Context(), a.ID)
	if err != nil || counted != 3 || closed != 5 || approvedBy != 1 || got.Approvals() != 3 || got.State != store.ApprovalApproved {
		t.Fatalf("%d counted, %d closed, %d made it approved, stored %+v %v; want 3, 5, 1", counted, closed, approvedBy, got, err)
	}
}
