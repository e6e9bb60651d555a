package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
)

// Registration asks Sign to keep the signed card in the registry
// (registry.Registration).
type Registration = registry.Registration

// newRegistry builds the authority's registry over its store, its keys and
// its Sign, with its metrics and audit hooks.
func newRegistry(a *Authority) *registry.Registry {
	cfg := a.cfg
	rc := registry.Config{
		Agents: a.store, Keys: registryPort{a}, Signer: registryPort{a}, Now: a.now, Log: a.log,
		ActorOf: func(ctx context.Context) registry.Actor {
			who := actorOf(ctx)
			return registry.Actor{Caller: who.caller, RequestID: who.requestID, Provenance: who.provenance}
		},
		Keep: cfg.RegistryKeep, MaxAgents: cfg.RegistryMaxAgents, MaxAgentsPerCaller: cfg.RegistryMaxAgentsPerCaller,
		OpenPrivate: cfg.LogOpenPrivate, Lifetime: cfg.Lifetime, RefreshAt: cfg.RefreshAt,
		KeyRefresh: cfg.KeyRefresh, Limits: cfg.Limits,
		// The store committed the record with the action itself
		// (RemoveAgent, RevokeCard): the log hears of it here.
		Committed: func(rec audit.Record) {
			if a.logCommitted != nil { // the log and the event sinks
				a.logCommitted([]audit.Record{rec})
			}
			a.catalog.changed() // an agent removed or its card revoked
		},
		CardRevoked: func() {
			a.revocations.Forget()
			a.pokeDuties()
		},
		ResignRate: cfg.RegistryResignRate, ResignConcurrency: cfg.RegistryResignConcurrency,
		Throttles: registryPort{a}.throttles,
		Wake:      a.pokeDuties,
		Resigned:  func(outcome string) { a.metrics.registryResigns.WithLabelValues(outcome).Inc() },
		Stale:     func(n int) { a.metrics.registryStale.Set(float64(n)) },
	}
	if cfg.Log != nil {
		rc.SealSecret = func() ([]byte, error) {
			secret, err := cfg.Log.SealSecret()
			if err != nil {
				return nil, &UnavailableError{What: "transparency log key", Err: err}
			}
			return secret, nil
		}
	}
	return registry.New(rc)
}

// registryPort is the authority as the registry sees it: a Signer of
// registered cards and the signing Keys.
type registryPort struct{ a *Authority }

// SignAgain signs a registered card again as the registry asks, audited as
// registry.ResignCaller. The signing policy, which names callers, does not
// apply: the card was allowed when its caller registered it.
func (p registryPort) SignAgain(ctx context.Context, r registry.Resignature) error {
	_, err := p.a.Sign(ctx, SignRequest{
		Card: r.Card, StripUnknown: r.Options.StripUnknown, Mode: signer.Mode(r.Options.Profile), KeepSignatures: r.Options.KeepSignatures,
		Caller:       registry.ResignCaller,
		Identity:     access.Identity{Name: registry.ResignCaller, Principal: registry.ResignCaller},
		RequestID:    r.RequestID,
		Registration: r.Registration,
		resign:       true,
	})
	return err
}

// throttles returns how many requests the backends of the signing keys
// have had throttled so far (the KMS backends count them): the registry's
// re-signing slows down when it grows. The keys are opened already (the
// registry signs with them), so no backend is built here.
func (p registryPort) throttles() uint64 {
	a := p.a
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	keys, err := a.keys.signing(ctx, a.now())
	if err != nil {
		return 0
	}
	var n uint64
	seen := map[string]bool{}
	for _, k := range keys {
		scheme := a.keys.backendOf(k.KID)
		if seen[scheme] {
			continue
		}
		seen[scheme] = true
		if b, err := a.cfg.Backends.Backend(ctx, scheme); err == nil {
			if sr, ok := b.(backends.StatsReporter); ok {
				n += sr.Stats().Throttled
			}
		}
	}
	return n
}

// Records returns the cached key records.
func (p registryPort) Records(ctx context.Context) ([]jwks.KeyRecord, error) {
	return p.a.keys.records(ctx, false)
}

// SigningKIDs returns the kids of the keys that sign at now.
func (p registryPort) SigningKIDs(ctx context.Context, now time.Time) ([]string, error) {
	keys, err := p.a.keys.signing(ctx, now)
	if err != nil {
		return nil, err
	}
	kids := make([]string, len(keys))
	for i, k := range keys {
		kids[i] = k.KID
	}
	return kids, nil
}

// HoldRetired keeps a retired key published while live cards still carry
// it: its expiry is set RetireGrace ahead once less than half the grace is
// left.
func (p registryPort) HoldRetired(ctx context.Context, carried map[string]bool) error {
	a := p.a
	if len(carried) == 0 {
		return nil
	}
	grace := a.cfg.RetireGrace
	if grace <= 0 {
		return nil
	}
	now := a.now()
	views, err := a.keys.views(ctx, now)
	if err != nil {
		return err
	}
	hold := map[string]bool{}
	for _, v := range views {
		if carried[v.KID] && v.State == jwks.StateRetired && v.ExpiresAt != nil && v.ExpiresAt.Sub(now) < grace/2 {
			hold[v.KID] = true
		}
	}
	if len(hold) == 0 {
		return nil
	}
	until := now.Add(grace)
	// Automatic, but a change to a key record like any other: audited, so
	// the key records still agree with the audit trail.
	who := actor{caller: SystemCaller}
	_, err = a.admin.changeKeys(ctx, store.KeyTransition, func(_ context.Context, recs []jwks.KeyRecord) (store.KeyChange, error) {
		var ch store.KeyChange
		for _, r := range recs {
			if hold[r.KID] && r.RevokedAt == nil && (r.ExpireAt == nil || r.ExpireAt.Before(until)) {
				r.ExpireAt = &until
				ar, err := who.keyRecord(audit.KindKeyHold, r, "live cards still carry its signatures", a.now())
				if err != nil {
					return store.KeyChange{}, err
				}
				ch.Update = append(ch.Update, r)
				ch.Audit = append(ch.Audit, ar)
			}
		}
		return ch, nil
	})
	if err != nil {
		return fmt.Errorf("registry: keeping retired keys published: %w", err)
	}
	a.log.Warn("registry: retired keys kept published: live cards still carry them (their re-signing failed)", "kids", slices.Sorted(maps.Keys(hold)), "until", until)
	a.keys.invalidate()
	return nil
}
