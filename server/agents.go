package server

import (
	"context"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// What the registry (registry*.go, resign.go) and the gRPC API's view of
// it (grpcapi.Agents) reach the authority through, until the registry is a
// package of its own that takes these parts directly.

// LiveCard is c as the registry serves it now: without signatures by keys
// revoked since it was signed.
func (a *Authority) LiveCard(ctx context.Context, c store.AgentCard) (store.AgentCard, error) {
	return a.liveCard(ctx, c)
}

// RevokedCards are the cards revoked by an administrator.
func (a *Authority) RevokedCards(ctx context.Context) ([]store.CardRevocation, error) {
	return a.revokedCards(ctx)
}

// changeKeys is KeyAdmin.changeKeys, for the registry's re-signing.
func (a *Authority) changeKeys(ctx context.Context, mode store.KeyChangeMode, fn func(ctx context.Context, recs []jwks.KeyRecord) (store.KeyChange, error)) ([]audit.Record, error) {
	return a.admin.changeKeys(ctx, mode, fn)
}

// adminCommitted tells the transparency log about the audit record of a
// registry administration, committed by the store with the action itself
// (Store.RemoveAgent, Store.RevokeCard), as changeKeys does for keys.
func (a *Authority) adminCommitted(rec audit.Record) {
	if a.tlog != nil {
		a.tlog.committed([]audit.Record{rec})
	}
}
