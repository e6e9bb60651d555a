package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/policy"
)

func TestPolicyRefusalIsAudited(t *testing.T) {
	ctx := t.Context()
	a, _ := newAuthority(t)
	teamAPolicy(t, a)
	card := []byte(`{"name":"A","description":"d","supportedInterfaces":[{"url":"https://evil.example.net/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)
	id := access.Identity{Name: "token:team-a", Method: access.MethodToken, Roles: []access.Role{access.RoleSigner}}
	_, err := a.Sign(ctx, SignRequest{Card: card, Caller: id.Name, Identity: id, RequestID: "r1"})
	var refused *RefusedError
	// Record 1 is the first key's creation.
	if !errors.As(err, &refused) || refused.Refusal.Rule != "team-a" || refused.Seq != 2 {
		t.Fatalf("want a refusal by team-a audited as record 2, got %v", err)
	}
	recs, err := a.store.ListAudit(ctx, 1, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("audit: %v %v", recs, err)
	}
	r := recs[0]
	if r.Outcome != audit.OutcomeRefused || r.Caller != "token:team-a" || r.RequestID != "r1" || r.CardName != "A" || r.KID != "" || len(r.CanonicalSHA256) != 32 || r.Reason != refused.Error() {
		t.Fatalf("refused record: %+v", r)
	}
	// The same card for a host the rule allows is signed and chained after.
	ok := []byte(strings.Replace(string(card), "evil.example.net", "api.team-a.example.com", 1))
	res, err := a.Sign(ctx, SignRequest{Card: ok, Caller: id.Name, Identity: id})
	if err != nil || res.Audit[0].Seq != 3 {
		t.Fatalf("allowed card: %v", err)
	}
}

// teamAPolicy lets token:team-a sign cards on *.team-a.example.com alone.
func teamAPolicy(t *testing.T, a *Authority) {
	t.Helper()
	pol, probs := policy.Compile(policy.Config{Rules: []policy.Rule{{
		Name: "team-a", Identities: []string{"token:team-a"}, CardNames: []string{"*"}, Hosts: []string{"*.team-a.example.com"},
	}}})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	a.cfg.Policy = pol
}
