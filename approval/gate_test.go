package approval

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/store"
)

func TestIDs(t *testing.T) {
	id := NewID()
	if err := CheckID("id", id); err != nil || id == NewID() {
		t.Fatalf("NewID %q: %v (or not random)", id, err)
	}
	for _, bad := range []string{"", "apr_", "apr_" + strings.Repeat("a", 25), "apr_" + strings.Repeat("A", 26), "apx_" + strings.Repeat("a", 26),
		"apr_" + strings.Repeat("a", 25) + "1", "apr_" + strings.Repeat("a", 26) + "\n", "apr_\x1b[2J"} {
		err := CheckID("approval_id", bad)
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Field != "approval_id" || strings.ContainsAny(err.Error(), "\n\x1b") {
			t.Errorf("CheckID(%q) = %v; want an escaped InvalidError naming approval_id", bad, err)
		}
	}
}

// TestUsable: an approval signs only its requester's exact bytes, for its
// agent, under its rule, once approved and before it expires.
func TestUsable(t *testing.T) {
	now := time.Now()
	digest := sha256.Sum256([]byte("card"))
	base := store.Approval{ID: "apr_x", Requester: "token:ci", Rule: "new-host", Required: 1, CanonicalSHA256: digest[:], AgentID: "orders",
		ExpiresAt: now.Add(time.Hour), State: store.ApprovalApproved}
	req := Request{Identity: access.Identity{Name: "token:ci"}, Digest: digest, AgentID: "orders"}
	dec := policy.Decision{Rule: "new-host", Approvals: 1}
	tests := []struct {
		name string
		edit func(a *store.Approval, r *Request, d *policy.Decision)
		ok   bool
		want string
	}{
		{"approved", func(*store.Approval, *Request, *policy.Decision) {}, true, ""},
		{"another requester", func(_ *store.Approval, r *Request, _ *policy.Decision) { r.Identity.Name = "token:other" }, false, "only its requester"},
		{"other bytes", func(_ *store.Approval, r *Request, _ *policy.Decision) { r.Digest[0] ^= 1 }, false, "exact bytes"},
		{"another agent", func(_ *store.Approval, r *Request, _ *policy.Decision) { r.AgentID = "billing" }, false, `not agent "billing"`},
		{"not registered", func(_ *store.Approval, r *Request, _ *policy.Decision) { r.AgentID = "" }, false, "not signing without registering"},
		{"another rule: ask again", func(_ *store.Approval, _ *Request, d *policy.Decision) { d.Rule = "new-scheme" }, false, ""},
		{"the rule asks more approvals now: ask again", func(_ *store.Approval, _ *Request, d *policy.Decision) { d.Approvals = 2 }, false, ""},
		{"the rule names another group now: ask again", func(_ *store.Approval, _ *Request, d *policy.Decision) { d.Group = "security" }, false, ""},
		{"the rule asks fewer approvals now", func(a *store.Approval, _ *Request, _ *policy.Decision) { a.Required = 3 }, true, ""},
		{"denied", func(a *store.Approval, _ *Request, _ *policy.Decision) {
			a.State, a.Votes = store.ApprovalDenied, []store.Vote{{Approver: "token:bob", Reason: "no"}}
		}, false, `denied by "token:bob": "no"`},
		{"expired", func(a *store.Approval, _ *Request, _ *policy.Decision) { a.ExpiresAt = now.Add(-time.Second) }, false, "expired at"},
		{"pending", func(a *store.Approval, _ *Request, _ *policy.Decision) { a.State = store.ApprovalPending }, false, "requires 1 approval"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, r, d := base, req, dec
			tc.edit(&a, &r, &d)
			ok, err := usable(a, r, d, now)
			if ok != tc.ok || (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("usable = %v, %v; want %v, %q", ok, err, tc.ok, tc.want)
			}
		})
	}
}
