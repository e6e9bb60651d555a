// Package server is cardsignd's glue: the signing authority (keys from the
// store, signers from the backends, audit records committed before a
// signature is returned), its gRPC services and its HTTP endpoints. The
// rules live in card, signer, jwks, audit and store; this package wires them.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cardsign/cardsign/approval"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/events"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/registry/catalog"
	"github.com/cardsign/cardsign/server/revocations"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/witness"
)

// Config is what the authority needs to know beyond its store.
type Config struct {
	// Backends opens keys by URI scheme; nil means a registry holding only
	// the unrestricted file backend (the embedded default, and tests).
	Backends    *backends.Registry
	KeyBackend  string        // scheme of the backend that makes new keys ("file")
	KeyDir      string        // where the file backend puts new keys
	DefaultAlg  jose.Alg      // for new keys
	Prepublish  time.Duration // RotateKey: how long a new key is published before it signs
	RetireGrace time.Duration // how long a retired key stays published
	JKU         string        // put in every signature's protected header when set
	// Lifetime, when positive, puts iat and exp in every signature's
	// protected header; the registry signs a registered card again once
	// RefreshAt (a fraction, default registry.DefaultRefreshAt) of it has passed.
	Lifetime      time.Duration
	RefreshAt     float64
	Limits        strictjson.Limits
	JWKSMaxAge    time.Duration
	RevocationTTL time.Duration
	AuditBatch    int
	// RegistryKeep is how many versions of each agent's card the registry
	// keeps; 0 means limits.DefaultRegistryKeep.
	RegistryKeep int
	// RegistryMaxAgents and RegistryMaxAgentsPerCaller bound the agents the
	// registry holds, in all and per caller; 0 means
	// limits.DefaultRegistryMaxAgents, limits.DefaultRegistryMaxAgentsPerCaller.
	RegistryMaxAgents          int
	RegistryMaxAgentsPerCaller int
	// RegistryResignRate and RegistryResignConcurrency pace the registry's
	// re-signing (registry.Config.ResignRate, ResignConcurrency).
	RegistryResignRate        float64
	RegistryResignConcurrency int
	// LogOpenPrivate shows a private agent's caller, card name and hosts
	// in its log entries; by default they are sealed (SealRecord).
	LogOpenPrivate bool
	// KeyRefresh is how often key records are re-read from the store, so
	// that a change made by another replica is seen.
	KeyRefresh time.Duration
	// DisableOnRevoke also switches a revoked key off at its backend (a KMS
	// key version disabled), when the backend can.
	DisableOnRevoke bool
	// Policy decides which cards a caller may sign; nil allows every card.
	Policy *policy.Policy
	// BackendConcurrency bounds concurrent signatures per backend scheme;
	// the "default" entry applies to schemes not listed, and
	// DefaultBackendConcurrency when it is absent too.
	BackendConcurrency map[string]int
	// Metrics receives the authority's metrics; nil makes a private set.
	Metrics *Metrics
	// ImportBackends open the keys a caller names for import, by scheme:
	// the file backend restricted to the key and import directories. A
	// scheme not listed opens through its registered backend. Keys already
	// on record reopen through the registered backends, as recorded.
	ImportBackends map[string]backends.Backend
	// OmitAuditHead leaves the audit head out of the revocation document,
	// for verifiers built before it had one (they refuse an unknown member);
	// truncation of the audit log then goes unseen by them and by
	// cardsign audit verify.
	OmitAuditHead bool
	// Replica names this process among the replicas sharing the store (in
	// the duties lease and the logs); empty: host/pid/random.
	Replica string
	// ClockSkew is added to the host clock before the store clock's offset
	// is measured: a host whose clock is wrong, for tests. Times the
	// authority takes come from the store's clock whatever it is.
	ClockSkew time.Duration
	// Log signs the transparency log's checkpoints. When set, every
	// signature returned carries its inclusion proof and the log is served
	// over HTTP; nil (tests) returns cards without proofs (the store keeps
	// the tree either way).
	Log *transparency.Signer
	// Witnesses are the log's witnesses (C2SP tlog-witness): the replica
	// holding the duties lease asks them to cosign each new checkpoint, and
	// the proofs returned carry the cosigned checkpoint as WitnessWait says.
	// Empty: checkpoints are signed by the log alone.
	Witnesses []witness.Endpoint
	// WitnessPolicy is the quorum of Witnesses a checkpoint needs.
	WitnessPolicy transparency.WitnessPolicy
	// WitnessWait is what signing does until its checkpoint is witnessed.
	WitnessWait WitnessWait
	// WitnessTimeout bounds one add-checkpoint request (0: the collector's
	// default).
	WitnessTimeout time.Duration
	// Catalog is the organisation's AI Catalog and did:web DID (off when
	// its Domain is empty).
	Catalog catalog.Settings
	// Events are the event sinks the audit log's records are delivered to
	// (none: no delivery).
	Events EventsSettings
}

// Authority is the signing authority. It orchestrates its parts: the
// keyring (key records, opened keys), the revocation publisher, the
// readiness prober and the audit batcher; each holds its own state.
type Authority struct {
	cfg     Config
	store   store.Store
	batcher *audit.Batcher
	log     *slog.Logger
	now     func() time.Time
	metrics *Metrics

	keys        *keyring
	admin       *KeyAdmin
	revocations *revocations.Publisher
	docs        *documents
	// replicaNamed: Config.Replica was set, and ClaimReplica keeps it to
	// one live process.
	replicaNamed bool
	readiness    *readiness
	clock        *clock
	duties       *duties
	poke         chan struct{} // asks RunDuties for a round now

	registry *registry.Registry
	// approvals holds the signatures a signing policy rule sends for
	// approval, and takes the votes.
	approvals *approval.Desk
	// catalog publishes the AI Catalog (its publisher nil when
	// Config.Catalog is off).
	catalog catalogDuty

	tlog *transparency.Checkpointer // nil without Config.Log
	// witnesses: the log's witnesses (nil without Config.Witnesses).
	witnesses *witnessing
	// events: delivery to the event sinks (nil without Config.Events).
	events *eventing
	// startErr is a configuration NewAuthority could not wire; Bootstrap
	// returns it.
	startErr error
	// logCommitted learns of audit records committed outside the batcher
	// (nil without Config.Log).
	logCommitted func([]audit.Record)
}

// NewAuthority wires an authority over st. Close it to flush the audit log.
func NewAuthority(cfg Config, st store.Store, log *slog.Logger) *Authority {
	if cfg.KeyRefresh <= 0 {
		cfg.KeyRefresh = time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Backends == nil {
		cfg.Backends = backends.NewRegistry()
		_ = cfg.Backends.Add(file.Scheme, file.Constructor, backends.Config{}) // a valid scheme, added once
	}
	if cfg.Events.Source == "" {
		cfg.Events.Source = DefaultEventSource
	}
	named := cfg.Replica != ""
	if !named {
		cfg.Replica = defaultHolder()
	}
	clk := newClock(st, cfg.ClockSkew)
	now := clk.now
	keys := newKeyring(st, cfg.Backends, cfg.KeyRefresh, jwks.Policy{RetireGrace: cfg.RetireGrace},
		newBackendLimits(cfg.BackendConcurrency, cfg.Metrics.backendSign))
	d := newDuties(st, cfg.Replica, clk, log)
	a := &Authority{
		cfg:       cfg,
		store:     st,
		batcher:   nil, // below: it reports commits to the log
		log:       log,
		metrics:   cfg.Metrics,
		now:       now,
		keys:      keys,
		readiness: newReadiness(st, keys, now, cfg.Metrics, log),
		clock:     clk,
		duties:    d,
		poke:      make(chan struct{}, 1),

		replicaNamed: named,
	}
	var onCommit func([]audit.Record)
	if cfg.Log != nil {
		a.tlog = transparency.NewCheckpointer(cfg.Log, st)
		onCommit = a.tlog.Committed
		if len(cfg.Witnesses) > 0 {
			w, err := newWitnessing(cfg, a.tlog, st, st, cfg.Metrics, log)
			if err != nil {
				a.startErr = err
			} else {
				a.witnesses = w
				onCommit = func(recs []audit.Record) {
					a.tlog.Committed(recs)
					w.committed(recs)
				}
			}
		}
	}
	if len(cfg.Events.Sinks) > 0 {
		e, err := newEventing(cfg.Events, st, d.current, a.tlog, log)
		if err != nil {
			a.startErr = errors.Join(a.startErr, fmt.Errorf("events: %w", err))
		} else {
			a.events = e
			cfg.Metrics.Register(eventsCollector{st: st, e: e})
			logged := onCommit
			onCommit = func(recs []audit.Record) {
				if logged != nil {
					logged(recs)
				}
				e.wake()
			}
		}
	}
	a.logCommitted = onCommit
	a.revocations = newPublisher(a, cfg.OmitAuditHead)
	a.docs = &documents{keys: keys, revocations: a.revocations, readiness: a.readiness, metrics: a.metrics, log: log, now: now,
		jwksMaxAge: cfg.JWKSMaxAge, revocationTTL: cfg.RevocationTTL, didDomain: cfg.Catalog.Domain}
	a.registry = newRegistry(a)
	a.approvals = newApprovals(a)
	a.catalog = newCatalogDuty(a)
	a.batcher = audit.NewBatcherWith(st, audit.BatcherOptions{MaxBatch: cfg.AuditBatch, OnCommit: onCommit})
	a.admin = &KeyAdmin{cfg: cfg, st: st, keys: keys, now: now, log: log, logged: onCommit,
		changed: func() {
			a.revocations.Forget()
			a.catalog.changed()
			a.pokeDuties()
		},
		requestReady: a.readiness.request}
	a.metrics.Register(keysCollector{a: a, desc: keysDesc})
	return a
}

// Admin is the authority's key administration.
func (a *Authority) Admin() *KeyAdmin { return a.admin }

// API is what the packages that serve the authority (server/grpcapi) use
// besides its methods.
type API struct {
	Audit   store.AuditLog    // listed a page at a time
	Metrics *Metrics          // calls and refusals are counted there
	Limits  strictjson.Limits // the cards read (LintCard, as Sign does)
	// Approvals lists, reads and votes on the signatures held for
	// approval.
	Approvals *approval.Desk
	// Events makes the events of audit records (cardsign events tail),
	// as the sinks receive them.
	Events events.Builder
	// Draining is closed when the authority starts shutting down: streams
	// that would run until the client leaves (events tail --follow) end,
	// so the shutdown does not wait for them.
	Draining <-chan struct{}
}

// API returns the parts the serving packages use.
func (a *Authority) API() API {
	return API{Audit: a.store, Metrics: a.metrics, Limits: a.cfg.Limits, Approvals: a.approvals, Events: a.cfg.Events.Builder(),
		Draining: a.readiness.drained}
}

// Replica is this process's name among the replicas (Config.Replica, or
// the host/pid/random name given when it was empty).
func (a *Authority) Replica() string { return a.cfg.Replica }

// Drain marks the authority as shutting down, for readiness.
func (a *Authority) Drain() { a.readiness.drain() }

// Close commits the audit records already queued and stops the batcher.
func (a *Authority) Close() error { return a.batcher.Close() }

// Bootstrap measures the store clock's offset and creates and activates a
// first key when the store has none: the embedded default must sign out of
// the box. Replicas starting together on an empty store make one key. On a
// store with keys, it brings keys made before key administration was
// audited into the audit trail (baselineKeys).
func (a *Authority) Bootstrap(ctx context.Context) (created bool, err error) {
	if a.startErr != nil {
		return false, a.startErr
	}
	if err := a.clock.sync(ctx); err != nil {
		return false, &UnavailableError{What: "store clock", Err: err}
	}
	recs, err := a.keys.records(ctx, true)
	if err != nil {
		return false, err
	}
	if len(recs) > 0 {
		return false, a.admin.baselineKeys(ctx)
	}
	rec, err := a.admin.makeKey(ctx, audit.KindKeyCreate, a.cfg.DefaultAlg, func(_ time.Time, existing []jwks.KeyRecord) error {
		if len(existing) > 0 {
			return errAlreadyBootstrapped
		}
		return nil
	}, func(rec *jwks.KeyRecord) {
		at := rec.CreatedAt
		rec.ActivateAt = &at
	})
	if errors.Is(err, errAlreadyBootstrapped) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	a.log.Info("created and activated the first signing key", "kid", rec.KID, "alg", rec.Alg, "uri", backends.Redact(rec.URI), "caller", actorOf(ctx).caller)
	_, err = a.keys.records(ctx, true)
	return true, err
}

// errAlreadyBootstrapped: another replica made the first key.
var errAlreadyBootstrapped = errors.New("another process created the first key")

// CheckReadiness runs one readiness check now and records its outcome: the
// store answers and takes a write, a key is active, and every key due to
// sign makes a signature that verifies against its published key. It is a
// canary, not a probe: Ready reports its last outcome.
func (a *Authority) CheckReadiness(ctx context.Context) error { return a.readiness.check(ctx) }

// WatchReadiness runs CheckReadiness every interval until ctx is done, each
// check bounded by timeout, and at once after a key changes. A failure is
// logged when the state changes, not on every tick. notify, when set, sees
// the readiness after every check (the gRPC health service follows it).
func (a *Authority) WatchReadiness(ctx context.Context, interval, timeout time.Duration, notify func(error)) {
	a.readiness.watch(ctx, interval, timeout, notify)
}

// Ready reports the last readiness check's outcome: nil when the authority
// can sign.
func (a *Authority) Ready() error { return a.readiness.ready() }
