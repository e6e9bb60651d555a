package server

import (
	"strings"
	"testing"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

// TestPrivateAgentAdminEntriesSealed: the log entries of a private agent's
// card revocation and removal commit to their caller under the agent's
// salt, like the agent's other entries, instead of showing who acted on
// the card whose SHA-256 those entries show; a public agent's show the
// caller. The store reads them back so that each entry is made again from
// its record byte for byte.
func TestPrivateAgentAdminEntriesSealed(t *testing.T) {
	onBothStores(t, testPrivateAgentAdminEntriesSealed)
}

func testPrivateAgentAdminEntriesSealed(t *testing.T, a *Authority) {
	ctx := t.Context()
	for _, ag := range []struct {
		id  string
		vis store.Visibility
	}{{"secret-agent", store.Private}, {"open-agent", store.Public}} {
		if _, err := a.Sign(ctx, SignRequest{Card: registryCard(t), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"}, RequestID: "reg-" + ag.id,
			Registration: &Registration{AgentID: ag.id, Visibility: ag.vis}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Agents().RevokeAgentCard(ctx, ag.id, 0, "withdrawn in a test", "token:team-"+ag.id); err != nil {
			t.Fatal(err)
		}
		if err := a.registry.Remove(ctx, ag.id, "token:team-"+ag.id); err != nil {
			t.Fatal(err)
		}
	}
	salt, err := a.registry.Salt("secret-agent")
	if err != nil {
		t.Fatal(err)
	}
	recs, entries := loggedRecords(t, a)
	admin := map[string]int{}
	for i, r := range recs {
		if !r.Kind().IsRegistry() {
			continue
		}
		d, err := audit.DecodeAgentDetail(r.Detail)
		if err != nil {
			t.Fatal(err)
		}
		admin[d.Agent]++
		e, err := transparency.ParseEntry(entries[i])
		if err != nil {
			t.Fatal(err)
		}
		if d.Agent == "open-agent" {
			if e.Sealed() || e.Caller != "token:team-open-agent" {
				t.Errorf("record %d (%s of a public agent): entry %s; want it open", r.Seq, r.Outcome, entries[i])
			}
			continue
		}
		for _, shown := range []string{r.Caller, "team-secret", "secret-agent", "withdrawn"} {
			if strings.Contains(string(entries[i]), shown) {
				t.Errorf("record %d (%s of a private agent): the entry shows %q: %s", r.Seq, r.Outcome, shown, entries[i])
			}
		}
		if !e.OpensCaller(salt, "token:team-secret-agent") {
			t.Errorf("record %d (%s of a private agent): the agent's salt does not open the entry's caller: %s", r.Seq, r.Outcome, entries[i])
		}
	}
	if admin["secret-agent"] != 2 || admin["open-agent"] != 2 {
		t.Fatalf("registry administration records per agent: %v; want a revocation and a removal each", admin)
	}
}
