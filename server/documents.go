package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cardsign/cardsign/jwks"
)

// JWKS renders the published key set now. It is computed from the stored
// records on each call (microseconds), never from a backend.
func (a *Authority) JWKS(ctx context.Context) (jwks.Document, error) {
	recs, err := a.records(ctx, false)
	if err != nil {
		a.log.Error("JWKS not served", "err", err)
		return jwks.Document{}, err
	}
	doc, err := jwks.Render(a.now(), recs, a.policy(), a.cfg.JWKSMaxAge)
	if err != nil {
		a.log.Error("JWKS not served", "err", err)
	}
	return doc, err
}

// Revocations returns the signed revocation document. It is re-signed, with
// the next sequence number, when the revoked set or the signing key changes
// and when half its lifetime has passed, so a cached copy never expires in a
// client's hands while the daemon runs.
func (a *Authority) Revocations(ctx context.Context) ([]byte, error) {
	doc, err := a.revocations(ctx)
	if err != nil {
		a.log.Error("revocation document not served", "err", err)
	}
	return doc, err
}

func (a *Authority) revocations(ctx context.Context) ([]byte, error) {
	// One re-signing at a time, so sequence numbers served by this process
	// only ever grow.
	a.revMu.Lock()
	defer a.revMu.Unlock()
	recs, err := a.records(ctx, false)
	if err != nil {
		return nil, err
	}
	now := a.now()
	views := jwks.Derive(now, recs, a.policy())
	revoked := jwks.RevokedFrom(recs, now)
	key, err := a.documentSigner(ctx, views)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoRevocationSigner, err)
	}
	var state strings.Builder
	state.WriteString(key.KID)
	for _, r := range revoked {
		state.WriteString("|" + r.KID)
	}
	a.mu.Lock()
	if a.revDoc != nil && a.revState == state.String() && now.Before(a.revUntil) {
		doc := a.revDoc
		a.mu.Unlock()
		return doc, nil
	}
	a.mu.Unlock()

	seq, err := a.store.NextSequence(ctx, "revocations")
	if err != nil {
		return nil, err
	}
	ttl := a.cfg.RevocationTTL
	doc, err := jwks.SignRevocations(ctx, jwks.Revocations{
		Sequence:  seq,
		IssuedAt:  now.Truncate(time.Second),
		ExpiresAt: now.Add(ttl).Truncate(time.Second),
		Revoked:   revoked,
	}, key.Signer, key.Alg, key.KID)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.revDoc, a.revState, a.revUntil = doc, state.String(), now.Add(ttl/2)
	a.mu.Unlock()
	return doc, nil
}

// invalidateRevocations makes the next Revocations call re-sign.
func (a *Authority) invalidateRevocations() {
	a.mu.Lock()
	a.revDoc = nil
	a.mu.Unlock()
}
