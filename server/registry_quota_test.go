package server

import (
	"errors"
	"testing"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/registry"
)

// TestRegistryQuotas: a caller registers at most
// registry.max_agents_per_caller agents and the registry holds at most
// registry.max_agents; a refusal is RESOURCE_EXHAUSTED naming the limit,
// before anything is signed. New versions of a live agent and the
// registry's own re-signatures are never refused.
func TestRegistryQuotas(t *testing.T) {
	a, _ := newAuthority(t)
	a.cfg.RegistryMaxAgents, a.cfg.RegistryMaxAgentsPerCaller = 3, 2
	a.registry = newRegistry(a) // built from the configuration
	ctx := t.Context()
	register := func(caller, id string) error {
		_, err := a.Sign(ctx, SignRequest{Card: registryCard(t), Caller: caller, Identity: access.Identity{Name: caller}, RequestID: "r",
			Registration: &Registration{AgentID: id}})
		return err
	}
	for _, tc := range []struct {
		caller, id string
		limit      string // the quota that refuses it; "" when accepted
	}{
		{"token:a", "a1", ""},
		{"token:a", "a2", ""},
		{"token:a", "a3", "registry.max_agents_per_caller"},
		{"token:a", "a1", ""}, // a new version of a live agent
		{"token:b", "b1", ""},
		{"token:b", "b2", "registry.max_agents"},
		{"token:a", "a3", "registry.max_agents"},
	} {
		before, _, _ := a.store.AuditHead(ctx)
		err := register(tc.caller, tc.id)
		if tc.limit == "" {
			if err != nil {
				t.Fatalf("%s registering %s: %v", tc.caller, tc.id, err)
			}
			continue
		}
		var qe *registry.QuotaError
		if !errors.As(err, &qe) || qe.Limit != tc.limit {
			t.Fatalf("%s registering %s: err = %v, want the quota %s", tc.caller, tc.id, err, tc.limit)
		}
		// Its gRPC status: server/grpcapi's TestQuotaStatus.
		if after, _, _ := a.store.AuditHead(ctx); after != before {
			t.Fatalf("%s registering %s: refused by a quota, yet %d audit records were written", tc.caller, tc.id, after-before)
		}
	}
	// A full registry still follows the keys.
	pendingKey(t, a)
	if err := a.dutyRound(ctx); err != nil {
		t.Fatalf("re-signing a full registry: %v", err)
	}
	if c, _ := a.registry.Card(ctx, "b1", 0); len(c.KIDs) != 2 {
		t.Fatalf("b1 carries %v after a rotation in a full registry", c.KIDs)
	}
	// Removing an agent makes room.
	if err := a.registry.Remove(ctx, "b1", "token:admin"); err != nil {
		t.Fatal(err)
	}
	if err := register("token:b", "b2"); err != nil {
		t.Fatalf("after a removal: %v", err)
	}
}
