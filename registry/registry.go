// Package registry keeps the latest signed card of each of the
// organisation's agents: registration (quotas, visibility, versions),
// removal, card revocation, serving the cards over HTTP, and signing them
// again when the signing keys change. It takes the narrow parts of the
// authority it needs (a Signer, the Keys, the store's agent rows), not the
// authority.
package registry

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/limits"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
)

// MaxRevokedCards bounds the single cards the revocation document lists:
// each entry stays for good, and the document must stay well under the
// 1 MiB verifiers read.
const MaxRevokedCards = 1000

// Signer signs a registered card again and registers the result as the
// agent's next version (the authority's Sign, audited as ResignCaller).
type Signer interface {
	SignAgain(ctx context.Context, r Resignature) error
}

// Resignature is a registered card to sign again, as it was signed.
type Resignature struct {
	// Card is the card as signed, in its v1.0 shape (the stored input).
	Card    []byte
	Options Options
	// RequestID is the audit record's request id: why it is signed again.
	RequestID string
	// Registration registers the result as the agent's next version; pass
	// it to Prepare and Register unchanged.
	Registration *Registration
}

// Keys is what the registry needs of the signing keys.
type Keys interface {
	// Records returns the key records, as cached (at most KeyRefresh old).
	Records(ctx context.Context) ([]jwks.KeyRecord, error)
	// SigningKIDs returns the kids of the keys that sign at now (the
	// active key, and a pending one).
	SigningKIDs(ctx context.Context, now time.Time) ([]string, error)
	// HoldRetired keeps the retired keys among carried published while
	// live cards still carry their signatures (their re-signing failed).
	HoldRetired(ctx context.Context, carried map[string]bool) error
}

// Actor is who asked for an administrative action, as its audit record
// names it.
type Actor struct {
	Caller, RequestID, Provenance string
}

// Config is what a Registry is built from. Agents, Keys, Signer, Now,
// ActorOf and Log are required; a nil hook does nothing.
type Config struct {
	Agents store.Agents
	Keys   Keys
	Signer Signer
	Now    func() time.Time
	// ActorOf names the caller of ctx (the gRPC caller, or the daemon).
	ActorOf func(ctx context.Context) Actor
	Log     *slog.Logger

	// Keep is how many versions of a card are kept (0: limits.DefaultRegistryKeep);
	// MaxAgents and MaxAgentsPerCaller are the quotas (0: the defaults).
	Keep, MaxAgents, MaxAgentsPerCaller int
	// SealSecret derives the secret private agents' log entries are sealed
	// with (transparency.AgentSalt); nil: there is no transparency log.
	SealSecret func() ([]byte, error)
	// OpenPrivate: the log shows private agents' entries open (log.private).
	OpenPrivate bool
	// Lifetime is signing.lifetime; a card is signed again once RefreshAt
	// (a fraction, default DefaultRefreshAt) of it has passed.
	Lifetime  time.Duration
	RefreshAt float64
	// KeyRefresh is how long the revoked cards read from the store are
	// used before they are read again.
	KeyRefresh time.Duration
	// Limits bound the signed cards read back (servedCard).
	Limits strictjson.Limits

	// Committed is told of each administrative audit record the store
	// committed (for the transparency log).
	Committed func(audit.Record)
	// CardRevoked is called after a card revocation is committed (the
	// revocation document is stale, the duties have work).
	CardRevoked func()
	// Wake asks for a round of the duties now: a served card lost
	// signatures by revoked keys and is to be signed again.
	Wake func()
	// ResignRate bounds the signatures per second re-signing and pipeline
	// signs take together (Pace: pipeline signs first), for a backend
	// quota such as AWS KMS's; 0: none. ResignConcurrency bounds the
	// re-signatures in flight (0: DefaultResignConcurrency). Throttles
	// returns how many requests the signing keys' backends have had
	// throttled so far (nil: none report it): re-signing slows down when
	// it grows.
	ResignRate        float64
	ResignConcurrency int
	Throttles         func() uint64
	// ResignSlice is how long one Resign admits cards (0: ResignSlice).
	ResignSlice time.Duration

	// Resigned counts re-signatures by outcome (resigned, failed,
	// superseded); Stale is how many live cards the last pass left with
	// signatures other than the signing keys'.
	Resigned func(outcome string)
	Stale    func(n int)
}

// Registry is the agent registry over the store's agent rows.
type Registry struct {
	cfg Config

	sealMu     sync.Mutex
	sealSecret []byte // derived once (salt)

	revokedMu   sync.Mutex
	revokedList []store.CardRevocation // nil: not read yet, or invalidated
	revokedAt   time.Time

	resign *resigner
	puts   *putBatcher // nil: the store writes one card per commit
}

// New returns a registry over cfg.
func New(cfg Config) *Registry {
	if cfg.KeyRefresh <= 0 {
		cfg.KeyRefresh = time.Second
	}
	nop := func() {}
	if cfg.Committed == nil {
		cfg.Committed = func(audit.Record) {}
	}
	if cfg.CardRevoked == nil {
		cfg.CardRevoked = nop
	}
	if cfg.Wake == nil {
		cfg.Wake = nop
	}
	if cfg.Resigned == nil {
		cfg.Resigned = func(string) {}
	}
	if cfg.Stale == nil {
		cfg.Stale = func(int) {}
	}
	r := &Registry{cfg: cfg}
	if bp, ok := cfg.Agents.(batchPutter); ok {
		r.puts = &putBatcher{store: bp, keep: r.keep()}
	}
	r.resign = &resigner{r: r, pace: newPace(cfg.ResignRate, cfg.ResignConcurrency, cfg.Throttles, time.Now), slice: cmp.Or(cfg.ResignSlice, ResignSlice)}
	return r
}

// keep is how many versions of each agent's card are kept.
func (r *Registry) keep() int {
	if r.cfg.Keep <= 0 {
		return limits.DefaultRegistryKeep
	}
	return r.cfg.Keep
}

// Pace is the pace of the registry's re-signing, which pipeline signs
// take their share of first (Pace.Pipeline).
func (r *Registry) Pace() *Pace { return r.resign.pace }

// QuotaError is a new agent the registry's quotas leave no room for: the
// card is refused before it is signed. Limit names the configuration field.
type QuotaError struct {
	Limit string
	Max   int64
	// Caller is set for the per-caller quota.
	Caller string
}

func (e *QuotaError) Error() string {
	if e.Caller != "" {
		return fmt.Sprintf("registry: caller %q has registered %d agents, the most %s allows: remove agents it no longer needs (cardsign agents remove ID) or raise %s",
			e.Caller, e.Max, e.Limit, e.Limit)
	}
	return fmt.Sprintf("registry: the registry holds %d agents, the most %s allows: remove agents no longer needed (cardsign agents remove ID) or raise %s",
		e.Max, e.Limit, e.Limit)
}

// RevocationsFullError is a card revocation the revocation document has no
// room left for (MaxRevokedCards).
type RevocationsFullError struct{ Revoked int }

func (e *RevocationsFullError) Error() string {
	return fmt.Sprintf("%d cards are revoked already, the most the revocation document holds (%d): rotate keys to retire old cards instead", e.Revoked, MaxRevokedCards)
}

// Registration asks Sign to keep the signed card in the registry.
type Registration struct {
	// AgentID names the agent; empty: derived from the card (DeriveAgentID).
	AgentID string
	// Visibility of the agent's card; empty keeps a known agent's and makes
	// a new one private.
	Visibility store.Visibility
	// replaces is the version a re-signature replaces: the put fails with
	// store.ErrSuperseded when the agent has moved on meanwhile.
	replaces int64
	// resign marks the registry's own re-signature: it adds no agent, so
	// the quotas do not apply.
	resign bool
}

// RegistrationError is a registration the request asked for that cannot be
// made (a bad agent id, none derivable): the card is refused before it is
// signed.
type RegistrationError struct{ Reason string }

func (e *RegistrationError) Error() string { return "registry: " + e.Reason }

// NotRegisteredError is a card signed and audited but not stored in the
// registry (the store failed): the caller holds a valid signed card, and
// may retry to register it.
type NotRegisteredError struct {
	AuditSeq int64
	Err      error
}

func (e *NotRegisteredError) Error() string {
	return fmt.Sprintf("the card was signed (audit record %d) but not registered: %v", e.AuditSeq, e.Err)
}
func (e *NotRegisteredError) Unwrap() error { return e.Err }

// Options are how a registered card was signed, kept with it so that it
// can be signed again the same way.
type Options struct {
	StripUnknown   bool   `json:"strip_unknown,omitempty"`
	Profile        string `json:"profile,omitempty"`
	KeepSignatures bool   `json:"keep_signatures,omitempty"`
}

// Prepare settles, before a card v is signed, what its registration reg
// needs: the agent's id (checked; derived from v when reg names none),
// room in the registry's quotas for a new agent (checkQuota), its
// visibility (as asked, else as it was, else private), and, for a private
// agent, the salt that seals its log entries (nil when they show their
// values: a public agent, log.private open, no log). caller is who
// registers it. The settled registration names the agent.
func (r *Registry) Prepare(ctx context.Context, reg *Registration, v strictjson.Value, caller string) (*Registration, []byte, error) {
	id, err := agentID(reg, v)
	if err != nil {
		return nil, nil, err
	}
	settled := *reg
	settled.AgentID = id
	prev, err := r.cfg.Agents.AgentCard(ctx, id, 0)
	switch {
	case err == nil:
		if settled.Visibility == "" {
			settled.Visibility = prev.Visibility
		}
	case !errors.Is(err, store.ErrNotFound):
		return nil, nil, err
	case !reg.resign:
		if err := r.checkQuota(ctx, caller); err != nil {
			return nil, nil, err
		}
	}
	if settled.Visibility == "" {
		settled.Visibility = store.Private
	}
	if settled.Visibility == store.Public || r.cfg.SealSecret == nil || r.cfg.OpenPrivate {
		return &settled, nil, nil
	}
	salt, err := r.Salt(id)
	if err != nil {
		return nil, nil, err
	}
	return &settled, salt, nil
}

// Salt is the salt of agent id's sealed log entries
// (transparency.AgentSalt), from the seal secret derived once.
func (r *Registry) Salt(id string) ([]byte, error) {
	r.sealMu.Lock()
	defer r.sealMu.Unlock()
	if r.sealSecret == nil {
		secret, err := r.cfg.SealSecret()
		if err != nil {
			return nil, err
		}
		r.sealSecret = secret
	}
	return transparency.AgentSalt(r.sealSecret, id), nil
}

// checkQuota refuses a registration that would add a new agent beyond the
// registry's quotas. A new version of a live agent adds none (registry.keep
// bounds its versions). The counts are read before signing, so concurrent
// registrations may pass it together: the bound is exceeded by at most the
// number of registrations in flight.
func (r *Registry) checkQuota(ctx context.Context, caller string) error {
	total, mine, err := r.cfg.Agents.CountAgents(ctx, caller, ResignCaller)
	if err != nil {
		return err
	}
	maxTotal, maxMine := r.quotas()
	if total >= maxTotal {
		return &QuotaError{Limit: "registry.max_agents", Max: maxTotal}
	}
	if mine >= maxMine {
		return &QuotaError{Limit: "registry.max_agents_per_caller", Max: maxMine, Caller: caller}
	}
	return nil
}

func (r *Registry) quotas() (total, perCaller int64) {
	total, perCaller = limits.DefaultRegistryMaxAgents, limits.DefaultRegistryMaxAgentsPerCaller
	if r.cfg.MaxAgents > 0 {
		total = int64(r.cfg.MaxAgents)
	}
	if r.cfg.MaxAgentsPerCaller > 0 {
		perCaller = int64(r.cfg.MaxAgentsPerCaller)
	}
	return total, perCaller
}

// agentID returns the agent a registration names, checked, before anything
// is signed.
func agentID(reg *Registration, v strictjson.Value) (string, error) {
	id := reg.AgentID
	if id == "" {
		var err error
		if id, err = DeriveAgentID(v); err != nil {
			return "", &RegistrationError{Reason: err.Error()}
		}
	}
	if err := checkID(id); err != nil {
		return "", err
	}
	return id, nil
}

// checkID checks an agent id a caller gave.
func checkID(id string) error {
	if err := store.CheckAgentID(id); err != nil {
		return &RegistrationError{Reason: fmt.Sprintf("%q: %v", id, err)}
	}
	return nil
}

// DeriveAgentID names an agent after the card's first supportedInterfaces
// url: its host, then its path, lower case, every run of characters other
// than a-z 0-9 . _ turned into one '-', cut to store.MaxAgentIDLength.
// "https://Payments.example.com/a2a/v1" gives "payments.example.com-a2a-v1".
// The port is left out: one agent may move between ports.
func DeriveAgentID(v strictjson.Value) (string, error) {
	ifaces, _ := v.Get("supportedInterfaces")
	if ifaces.Kind != strictjson.Array || len(ifaces.Arr) == 0 {
		return "", errors.New("no agent id given and the card has no supportedInterfaces to derive one from: pass one")
	}
	raw, _ := ifaces.Arr[0].Get("url")
	u, err := url.Parse(raw.Str)
	if err != nil || u.Hostname() == "" {
		return "", errors.New("no agent id given and supportedInterfaces[0].url has no host to derive one from: pass one")
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(u.Hostname() + u.EscapedPath()) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	id := strings.TrimRight(b.String(), "-.")
	if len(id) > store.MaxAgentIDLength {
		id = strings.TrimRight(id[:store.MaxAgentIDLength], "-.")
	}
	return id, nil
}

// Register keeps a signed card as its agent's newest version: reg as
// Prepare settled it, res the signed card, opts how it was signed, caller
// who asked, auditSeq its first committed audit record.
func (r *Registry) Register(ctx context.Context, reg *Registration, res *signer.Result, opts Options, caller string, auditSeq int64) (store.AgentCard, error) {
	optsJSON, err := json.Marshal(opts)
	if err != nil {
		return store.AgentCard{}, err
	}
	var kids []string
	for _, s := range res.Signatures {
		if !slices.Contains(kids, s.KID) {
			kids = append(kids, s.KID)
		}
	}
	// The card as signed, in its v1.0 shape (a v0.3 card mapped, unknown
	// keys stripped when asked): its canonical forms follow from it, byte
	// for byte, and re-signing starts from it.
	c := store.AgentCard{
		ID: reg.AgentID, Visibility: reg.Visibility, Input: res.Loaded.Value.Compact(), Options: optsJSON, Signed: res.Card,
		CanonicalSHA256: res.CanonicalSHA256[:], KIDs: kids, Caller: caller, AuditSeq: auditSeq,
		Replaces: reg.replaces,
	}
	if reg.resign && r.puts != nil {
		return r.puts.put(ctx, c) // re-signed cards share commits
	}
	return r.cfg.Agents.PutAgentCard(ctx, c, r.keep())
}

// Card returns version v of agent id's card (0: the newest).
func (r *Registry) Card(ctx context.Context, id string, v int64) (store.AgentCard, error) {
	if err := checkID(id); err != nil {
		return store.AgentCard{}, err
	}
	return r.cfg.Agents.AgentCard(ctx, id, v)
}

// List returns the newest card of up to limit agents after after.
func (r *Registry) List(ctx context.Context, after string, limit int) ([]store.AgentCard, error) {
	return r.cfg.Agents.ListAgents(ctx, after, limit)
}

// History returns the kept versions of agent id, newest first.
func (r *Registry) History(ctx context.Context, id string) ([]store.AgentCard, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	return r.cfg.Agents.AgentHistory(ctx, id)
}

// actor is who asked, as ActorOf names ctx's caller, with caller instead
// when it is given.
func (r *Registry) actor(ctx context.Context, caller string) Actor {
	who := r.cfg.ActorOf(ctx)
	if caller != "" {
		who.Caller = caller
	}
	return who
}

// Remove deletes every version of agent id from the registry.
func (r *Registry) Remove(ctx context.Context, id, caller string) error {
	if err := checkID(id); err != nil {
		return err
	}
	who := r.actor(ctx, caller)
	// The removal and its audit record are one transaction; the record
	// names the newest version as that transaction reads it (which card
	// was served).
	rec, err := r.cfg.Agents.RemoveAgent(ctx, id, func(c store.AgentCard) (audit.Record, error) {
		rec := audit.Record{Time: r.cfg.Now(), Caller: who.Caller, RequestID: who.RequestID, Provenance: who.Provenance,
			Outcome: string(audit.KindAgentRemove), CanonicalSHA256: c.CanonicalSHA256,
			Detail: audit.EncodeAgentDetail(audit.AgentDetail{Agent: id})}
		return rec, r.sealAdmin(&rec, c)
	})
	if err != nil {
		return err
	}
	r.cfg.Committed(rec)
	r.cfg.Log.Info("agent removed from the registry", "agent", id, "caller", caller)
	return nil
}

// sealAdmin seals the audit record of a registry administration of card c
// (its removal, its revocation) like the agent's other entries: for a
// private agent, its log entry commits to the caller under the agent's
// salt instead of showing it next to the card's SHA-256, which the agent's
// sealed entries show too (transparency.SealRecord; nothing when the log
// shows private agents' entries open, or there is no log).
func (r *Registry) sealAdmin(rec *audit.Record, c store.AgentCard) error {
	if c.Visibility == store.Public || r.cfg.SealSecret == nil || r.cfg.OpenPrivate {
		return nil
	}
	salt, err := r.Salt(c.ID)
	if err != nil {
		return err
	}
	transparency.SealRecord(rec, salt)
	return nil
}

// CardRevocations converts stored card revocations to the revocation
// document's.
func CardRevocations(cards []store.CardRevocation) []jwks.CardRevocation {
	out := make([]jwks.CardRevocation, len(cards))
	for i, c := range cards {
		out[i] = jwks.CardRevocation{CanonicalSHA256: c.CanonicalSHA256, AgentID: c.AgentID, Version: c.Version, RevokedAt: c.RevokedAt, Reason: c.Reason}
	}
	return out
}

// RevokedCards returns the revoked cards, read from the store at most once
// per KeyRefresh (like the key records): the HTTP handler and the
// authority's verification consult them on every request. Revoke
// invalidates the copy.
func (r *Registry) RevokedCards(ctx context.Context) ([]store.CardRevocation, error) {
	r.revokedMu.Lock()
	defer r.revokedMu.Unlock()
	if r.revokedList != nil && time.Since(r.revokedAt) < r.cfg.KeyRefresh {
		return r.revokedList, nil
	}
	cards, err := r.cfg.Agents.RevokedCards(ctx)
	if err != nil {
		return nil, err
	}
	if cards == nil {
		cards = []store.CardRevocation{}
	}
	r.revokedList, r.revokedAt = cards, time.Now()
	return cards, nil
}

// Revoke revokes one registered card (version 0: the newest) by its
// canonical SHA-256: the signed revocation document lists it, verifiers
// refuse it while its keys stay good, the registry stops serving and
// re-signing it. A version already revoked keeps its first revocation.
// reason is checked by the caller (bounded like a key's: every revocation
// stays in the document for good, and verifiers read it whole).
func (r *Registry) Revoke(ctx context.Context, id string, version int64, reason, caller string) (store.CardRevocation, error) {
	c, err := r.Card(ctx, id, version)
	if err != nil {
		return store.CardRevocation{}, err
	}
	existing, err := r.RevokedCards(ctx)
	if err != nil {
		return store.CardRevocation{}, err
	}
	if len(existing) >= MaxRevokedCards {
		return store.CardRevocation{}, &RevocationsFullError{Revoked: len(existing)}
	}
	entry := store.CardRevocation{CanonicalSHA256: c.CanonicalSHA256, AgentID: c.ID, Version: c.Version, Reason: reason}
	if c.Visibility != store.Public {
		// The revocation document is public: a private agent's id and the
		// reason would tell anyone what a 404 hides. The log keeps them.
		entry.AgentID, entry.Reason = "", "unspecified"
	}
	who := r.actor(ctx, caller)
	rec := audit.Record{Time: r.cfg.Now(), Caller: who.Caller, RequestID: who.RequestID, Provenance: who.Provenance,
		Outcome: string(audit.KindCardRevoke), Reason: reason, CanonicalSHA256: c.CanonicalSHA256,
		Detail: audit.EncodeAgentDetail(audit.AgentDetail{Agent: c.ID, Version: c.Version})}
	if err := r.sealAdmin(&rec, c); err != nil {
		return store.CardRevocation{}, err
	}
	// The revocation and its audit record are one transaction.
	rev, rec, err := r.cfg.Agents.RevokeCard(ctx, entry, rec)
	if err != nil {
		return store.CardRevocation{}, err
	}
	r.cfg.Committed(rec)
	rev.AgentID, rev.Version = c.ID, c.Version // for the admin who asked, whatever the document shows
	r.revokedMu.Lock()
	r.revokedList = nil
	r.revokedMu.Unlock()
	r.cfg.CardRevoked()
	r.cfg.Log.Warn("card revoked", "agent", c.ID, "version", c.Version, "canonical_sha256", fmt.Sprintf("%x", c.CanonicalSHA256), "reason", reason, "caller", caller)
	return rev, nil
}

// CardRevoked reports whether c's content is among revoked. A stored card is in
// the v1.0 shape, one reading only, whose canonical SHA-256 is c's: the rule
// Verify applies to every reading of a card, for it.
func CardRevoked(revoked []store.CardRevocation, c store.AgentCard) bool {
	for _, r := range revoked {
		if bytes.Equal(r.CanonicalSHA256, c.CanonicalSHA256) {
			return true
		}
	}
	return false
}
