package server

import (
	"context"
	"errors"
	"strings"

	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/store"
)

// AgentsAPI is the card registry as the gRPC AgentService serves it
// (grpcapi.Agents): the registry's reads and removals, and the card
// revocation and serving rules the authority adds to them.
type AgentsAPI struct{ a *Authority }

// Agents returns the registry's API for the gRPC services.
func (a *Authority) Agents() AgentsAPI { return AgentsAPI{a} }

// AgentCard returns version v (0: the newest) of agent id's card.
func (x AgentsAPI) AgentCard(ctx context.Context, id string, v int64) (store.AgentCard, error) {
	return x.a.registry.Card(ctx, id, v)
}

// LiveCard is c as the registry serves it now: without signatures by keys
// revoked since it was signed (registry.Registry.Served); a card waiting to
// be signed again is unavailable, to be retried.
func (x AgentsAPI) LiveCard(ctx context.Context, c store.AgentCard) (store.AgentCard, error) {
	c, err := x.a.registry.Served(ctx, c)
	if errors.Is(err, registry.ErrResigning) {
		return store.AgentCard{}, &UnavailableError{What: "agent card (being signed again after a key revocation)", Err: err}
	}
	if err != nil {
		return store.AgentCard{}, &UnavailableError{What: "registry", Err: err}
	}
	return c, nil
}

// RevokedCards are the cards revoked by an administrator.
func (x AgentsAPI) RevokedCards(ctx context.Context) ([]store.CardRevocation, error) {
	return x.a.registry.RevokedCards(ctx)
}

// ListAgents returns up to limit agents after the id after, by id.
func (x AgentsAPI) ListAgents(ctx context.Context, after string, limit int) ([]store.AgentCard, error) {
	return x.a.registry.List(ctx, after, limit)
}

// AgentHistory returns every kept version of agent id's card.
func (x AgentsAPI) AgentHistory(ctx context.Context, id string) ([]store.AgentCard, error) {
	return x.a.registry.History(ctx, id)
}

// RemoveAgent removes agent id and its versions, audited as caller's.
func (x AgentsAPI) RemoveAgent(ctx context.Context, id, caller string) error {
	return x.a.registry.Remove(ctx, id, caller)
}

// RevokeAgentCard revokes one registered card (version 0: the newest):
// registry.Registry.Revoke, once the reason is checked.
func (x AgentsAPI) RevokeAgentCard(ctx context.Context, id string, version int64, reason, caller string) (store.CardRevocation, error) {
	if strings.TrimSpace(reason) == "" {
		return store.CardRevocation{}, &InvalidArgumentError{Field: "reason", Reason: "say why the card is revoked: verifiers show it"}
	}
	// Bounded like a key's: every revocation stays in the document for good,
	// and verifiers read it whole (at most 1 MiB).
	reason, err := checkReason(reason)
	if err != nil {
		return store.CardRevocation{}, err
	}
	return x.a.registry.Revoke(ctx, id, version, reason, caller)
}
