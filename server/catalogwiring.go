package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/registry/catalog"
)

// newCatalog makes the AI Catalog's publisher over a's store, keyring,
// registry, audit log and duties lease; nil when the catalog is off.
func newCatalog(a *Authority) *catalog.Publisher {
	if !a.cfg.Catalog.Enabled() {
		return nil
	}
	signed := func(kind string) { a.metrics.catalogSignatures.WithLabelValues(kind).Inc() }
	return catalog.New(catalog.Config{
		Settings: a.cfg.Catalog,
		Store:    a.store,
		Keys:     publisherKeys{a.keys},
		Registry: a.registry,
		// Committed like a card's signatures: durable, then logged.
		Commit: func(ctx context.Context, recs []audit.Record) ([]audit.Record, error) {
			return a.commit(ctx, nil, recs)
		},
		Lease:       a.duties.held,
		Unavailable: func(what string, err error) error { return &UnavailableError{What: what, Err: err} },
		Now:         func() time.Time { return a.now() }, // a.now as it is at each call (tests move it)
		Log:         a.log,
		Lifetime:    a.cfg.Lifetime,
		Refresh:     a.cfg.KeyRefresh,
		Limits:      a.cfg.Limits,
		Wake:        a.pokeDuties,
		Signed:      signed,
		SignerAvailable: func(ok bool) {
			v := 0.0
			if ok {
				v = 1
			}
			a.metrics.catalogSigner.Set(v)
		},
	})
}

// catalogDuty is the AI Catalog as the authority drives it: told of
// changes, published by the duties.
type catalogDuty struct {
	pub  *catalog.Publisher // nil: the catalog is off
	poke func()             // asks the duties for a round now
	// registry moves at every change of the registry or the keys this
	// process makes or hears of (changed), catalog or not: the served
	// public cards (registry.Handler.CacheCards) are read again after it.
	registry *atomic.Uint64
}

// newCatalogDuty makes a's catalog duty (its publisher nil when the
// catalog is off).
func newCatalogDuty(a *Authority) catalogDuty {
	return catalogDuty{pub: newCatalog(a), poke: a.pokeDuties, registry: new(atomic.Uint64)}
}

// changed tells the catalog's publisher that what it is made from changed
// (an agent registered, re-signed, removed, its card revoked; a key), and
// asks the duties for a round: the holder signs the new catalog at once.
// The registry's served cards are read again either way.
func (c catalogDuty) changed() {
	c.registry.Add(1)
	if c.pub == nil {
		return
	}
	c.pub.Forget()
	c.poke()
}

// stored tells the publisher another replica stored a document: the
// stored catalog is read again.
func (c catalogDuty) stored() {
	if c.pub != nil {
		c.pub.Forget()
	}
}

// publish is the catalog's duty (catalog.Publisher.Publish): the lease
// holder signs it when due, another replica reads the stored one again.
// No ES256 key to sign with is logged and counted by the publisher, and
// answered 503 by the route; it does not fail the round, whose other
// duties are fine.
func (c catalogDuty) publish(ctx context.Context) error {
	if c.pub == nil {
		return nil
	}
	err := c.pub.Publish(ctx)
	if err == nil || errors.Is(err, catalog.ErrNoSigner) {
		return nil
	}
	return fmt.Errorf("AI Catalog: %w", err)
}

// servedCardsFresh bounds how long a public card is served from memory
// without reading the store: what another replica registers, re-signs or
// removes reaches no store notification, so it is served here within this;
// what this replica changes, or hears of (a key), is served at once.
const servedCardsFresh = time.Second

// servedCardsVersion moves whenever a served public card may have changed
// here: the registry (catalogDuty.changed) or the key records (a revoked
// key's signatures are dropped from what is served).
func (a *Authority) servedCardsVersion() uint64 {
	return a.catalog.registry.Load() + a.keys.version.Load()
}
