package server

import (
	"context"

	"github.com/cardsign/cardsign/store"
)

// The registry as the gRPC API reads it (grpcapi.Agents), besides the
// registry methods it calls as they are.

// LiveCard is c as the registry serves it now: without signatures by keys
// revoked since it was signed.
func (a *Authority) LiveCard(ctx context.Context, c store.AgentCard) (store.AgentCard, error) {
	return a.liveCard(ctx, c)
}

// RevokedCards are the cards revoked by an administrator.
func (a *Authority) RevokedCards(ctx context.Context) ([]store.CardRevocation, error) {
	return a.revokedCards(ctx)
}
