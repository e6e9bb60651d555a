package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/limits"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

// MaxRevokedCards bounds the single cards the revocation document lists:
// each entry stays for good, and the document must stay well under the
// 1 MiB verifiers read.
const MaxRevokedCards = 1000

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

// prepareRegistration settles, before a card is signed for agent id, what
// its registration needs: room in the registry's quotas for a new agent
// (checkQuota), its visibility (as asked, else as it was, else private),
// and, for a private agent, the salt that seals its log entries (nil when
// they show their values: a public agent, log.private open, no log).
func (a *Authority) prepareRegistration(ctx context.Context, id string, req SignRequest) (*Registration, []byte, error) {
	reg := *req.Registration
	prev, err := a.store.AgentCard(ctx, id, 0)
	switch {
	case err == nil:
		if reg.Visibility == "" {
			reg.Visibility = prev.Visibility
		}
	case !errors.Is(err, store.ErrNotFound):
		return nil, nil, err
	case !req.resign:
		if err := a.checkQuota(ctx, req.Caller); err != nil {
			return nil, nil, err
		}
	}
	if reg.Visibility == "" {
		reg.Visibility = store.Private
	}
	if reg.Visibility == store.Public || a.cfg.Log == nil || a.cfg.LogOpenPrivate {
		return &reg, nil, nil
	}
	salt, err := a.agentSalt(id)
	if err != nil {
		return nil, nil, err
	}
	return &reg, salt, nil
}

// agentSalt is the salt of agent id's sealed log entries
// (transparency.AgentSalt), from the seal secret derived once.
func (a *Authority) agentSalt(id string) ([]byte, error) {
	a.sealMu.Lock()
	defer a.sealMu.Unlock()
	if a.sealSecret == nil {
		secret, err := a.cfg.Log.SealSecret()
		if err != nil {
			return nil, &UnavailableError{What: "transparency log key", Err: err}
		}
		a.sealSecret = secret
	}
	return transparency.AgentSalt(a.sealSecret, id), nil
}

// checkQuota refuses a registration that would add a new agent beyond the
// registry's quotas. A new version of a live agent adds none (registry.keep
// bounds its versions). The counts are read before signing, so concurrent
// registrations may pass it together: the bound is exceeded by at most the
// number of registrations in flight.
func (a *Authority) checkQuota(ctx context.Context, caller string) error {
	total, mine, err := a.store.CountAgents(ctx, caller, ResignCaller)
	if err != nil {
		return err
	}
	maxTotal, maxMine := a.registryQuotas()
	if total >= maxTotal {
		return &QuotaError{Limit: "registry.max_agents", Max: maxTotal}
	}
	if mine >= maxMine {
		return &QuotaError{Limit: "registry.max_agents_per_caller", Max: maxMine, Caller: caller}
	}
	return nil
}

func (a *Authority) registryQuotas() (total, perCaller int64) {
	total, perCaller = limits.DefaultRegistryMaxAgents, limits.DefaultRegistryMaxAgentsPerCaller
	if a.cfg.RegistryMaxAgents > 0 {
		total = int64(a.cfg.RegistryMaxAgents)
	}
	if a.cfg.RegistryMaxAgentsPerCaller > 0 {
		perCaller = int64(a.cfg.RegistryMaxAgentsPerCaller)
	}
	return total, perCaller
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

// signOptions are how a registered card was signed, kept with it so that it
// can be signed again the same way.
type signOptions struct {
	StripUnknown   bool   `json:"strip_unknown,omitempty"`
	Profile        string `json:"profile,omitempty"`
	KeepSignatures bool   `json:"keep_signatures,omitempty"`
}

// agentID returns the agent a registration names, checked, before anything
// is signed.
func agentID(reg *Registration, v card.Value) (string, error) {
	id := reg.AgentID
	if id == "" {
		var err error
		if id, err = DeriveAgentID(v); err != nil {
			return "", &RegistrationError{Reason: err.Error()}
		}
	}
	if err := store.CheckAgentID(id); err != nil {
		return "", &RegistrationError{Reason: fmt.Sprintf("%q: %v", id, err)}
	}
	return id, nil
}

// DeriveAgentID names an agent after the card's first supportedInterfaces
// url: its host, then its path, lower case, every run of characters other
// than a-z 0-9 . _ turned into one '-', cut to store.MaxAgentIDLength.
// "https://Payments.example.com/a2a/v1" gives "payments.example.com-a2a-v1".
// The port is left out: one agent may move between ports.
func DeriveAgentID(v card.Value) (string, error) {
	ifaces, _ := v.Get("supportedInterfaces")
	if ifaces.Kind != card.Array || len(ifaces.Arr) == 0 {
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

// register keeps a signed card as its agent's newest version.
func (a *Authority) register(ctx context.Context, id string, req SignRequest, res *signer.Result, committed []audit.Record) (store.AgentCard, error) {
	vis := req.Registration.Visibility // settled by prepareRegistration
	opts, err := json.Marshal(signOptions{StripUnknown: req.StripUnknown, Profile: string(req.Mode), KeepSignatures: req.KeepSignatures})
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
	return a.store.PutAgentCard(ctx, store.AgentCard{
		ID: id, Visibility: vis, Input: res.Loaded.Value.Compact(), Options: opts, Signed: res.Card,
		CanonicalSHA256: res.CanonicalSHA256[:], KIDs: kids, Caller: req.Caller, AuditSeq: committed[0].Seq,
		Replaces: req.Registration.replaces,
	}, a.registryKeep())
}

func (a *Authority) registryKeep() int {
	if a.cfg.RegistryKeep > 0 {
		return a.cfg.RegistryKeep
	}
	return limits.DefaultRegistryKeep
}

// AgentCard returns version v of agent id's card (0: the newest).
func (a *Authority) AgentCard(ctx context.Context, id string, v int64) (store.AgentCard, error) {
	if err := store.CheckAgentID(id); err != nil {
		return store.AgentCard{}, &RegistrationError{Reason: fmt.Sprintf("%q: %v", id, err)}
	}
	return a.store.AgentCard(ctx, id, v)
}

// ListAgents returns the newest card of up to limit agents after after.
func (a *Authority) ListAgents(ctx context.Context, after string, limit int) ([]store.AgentCard, error) {
	return a.store.ListAgents(ctx, after, limit)
}

// AgentHistory returns the kept versions of agent id, newest first.
func (a *Authority) AgentHistory(ctx context.Context, id string) ([]store.AgentCard, error) {
	if err := store.CheckAgentID(id); err != nil {
		return nil, &RegistrationError{Reason: fmt.Sprintf("%q: %v", id, err)}
	}
	return a.store.AgentHistory(ctx, id)
}

// RemoveAgent deletes every version of agent id from the registry.
func (a *Authority) RemoveAgent(ctx context.Context, id, caller string) error {
	if err := store.CheckAgentID(id); err != nil {
		return &RegistrationError{Reason: fmt.Sprintf("%q: %v", id, err)}
	}
	who := actorOf(ctx)
	if caller != "" {
		who.caller = caller
	}
	// The removal and its audit record are one transaction; the record
	// names the newest version as that transaction reads it (which card
	// was served).
	rec, err := a.store.RemoveAgent(ctx, id, func(c store.AgentCard) (audit.Record, error) {
		rec := audit.Record{Time: a.now(), Caller: who.caller, RequestID: who.requestID, Provenance: who.provenance,
			Outcome: string(audit.KindAgentRemove), CanonicalSHA256: c.CanonicalSHA256,
			Detail: audit.EncodeAgentDetail(audit.AgentDetail{Agent: id})}
		return rec, a.sealAdmin(&rec, c)
	})
	if err != nil {
		return err
	}
	a.adminCommitted(rec)
	a.log.Info("agent removed from the registry", "agent", id, "caller", caller)
	return nil
}

// sealAdmin seals the audit record of a registry administration of card c
// (its removal, its revocation) like the agent's other entries: for a
// private agent, its log entry commits to the caller under the agent's
// salt instead of showing it next to the card's SHA-256, which the agent's
// sealed entries show too (transparency.SealRecord; nothing when the log
// shows private agents' entries open, or there is no log).
func (a *Authority) sealAdmin(rec *audit.Record, c store.AgentCard) error {
	if c.Visibility == store.Public || a.cfg.Log == nil || a.cfg.LogOpenPrivate {
		return nil
	}
	salt, err := a.agentSalt(c.ID)
	if err != nil {
		return err
	}
	transparency.SealRecord(rec, salt)
	return nil
}

// cardRevocations converts stored card revocations to the document's.
func cardRevocations(cards []store.CardRevocation) []jwks.CardRevocation {
	out := make([]jwks.CardRevocation, len(cards))
	for i, c := range cards {
		out[i] = jwks.CardRevocation{CanonicalSHA256: c.CanonicalSHA256, AgentID: c.AgentID, Version: c.Version, RevokedAt: c.RevokedAt, Reason: c.Reason}
	}
	return out
}

// revokedCards returns the revoked cards, read from the store at most once a
// second (like the key records): the registry's HTTP handler and VerifyCard
// consult them on every request. RevokeAgentCard invalidates the copy.
func (a *Authority) revokedCards(ctx context.Context) ([]store.CardRevocation, error) {
	a.revokedMu.Lock()
	defer a.revokedMu.Unlock()
	if a.revokedList != nil && time.Since(a.revokedAt) < a.cfg.KeyRefresh {
		return a.revokedList, nil
	}
	cards, err := a.store.RevokedCards(ctx)
	if err != nil {
		return nil, err
	}
	if cards == nil {
		cards = []store.CardRevocation{}
	}
	a.revokedList, a.revokedAt = cards, time.Now()
	return cards, nil
}

// RevokeAgentCard revokes one registered card (version 0: the newest) by its
// canonical SHA-256: the signed revocation document lists it, verifiers
// refuse it while its keys stay good, the registry stops serving and
// re-signing it. A version already revoked keeps its first revocation.
func (a *Authority) RevokeAgentCard(ctx context.Context, id string, version int64, reason, caller string) (store.CardRevocation, error) {
	if strings.TrimSpace(reason) == "" {
		return store.CardRevocation{}, &InvalidArgumentError{Field: "reason", Reason: "say why the card is revoked: verifiers show it"}
	}
	// Bounded like a key's: every revocation stays in the document for good,
	// and verifiers read it whole (at most 1 MiB).
	reason, err := checkReason(reason)
	if err != nil {
		return store.CardRevocation{}, err
	}
	c, err := a.AgentCard(ctx, id, version)
	if err != nil {
		return store.CardRevocation{}, err
	}
	existing, err := a.revokedCards(ctx)
	if err != nil {
		return store.CardRevocation{}, err
	}
	if len(existing) >= MaxRevokedCards {
		return store.CardRevocation{}, &PreconditionError{Reason: fmt.Sprintf("%d cards are revoked already, the most the revocation document holds (%d): rotate keys to retire old cards instead", len(existing), MaxRevokedCards)}
	}
	entry := store.CardRevocation{CanonicalSHA256: c.CanonicalSHA256, AgentID: c.ID, Version: c.Version, Reason: reason}
	if c.Visibility != store.Public {
		// The revocation document is public: a private agent's id and the
		// reason would tell anyone what a 404 hides. The log keeps them.
		entry.AgentID, entry.Reason = "", "unspecified"
	}
	who := actorOf(ctx)
	if caller != "" {
		who.caller = caller
	}
	rec := audit.Record{Time: a.now(), Caller: who.caller, RequestID: who.requestID, Provenance: who.provenance,
		Outcome: string(audit.KindCardRevoke), Reason: reason, CanonicalSHA256: c.CanonicalSHA256,
		Detail: audit.EncodeAgentDetail(audit.AgentDetail{Agent: c.ID, Version: c.Version})}
	if err := a.sealAdmin(&rec, c); err != nil {
		return store.CardRevocation{}, err
	}
	// The revocation and its audit record are one transaction.
	rev, rec, err := a.store.RevokeCard(ctx, entry, rec)
	if err != nil {
		return store.CardRevocation{}, err
	}
	a.adminCommitted(rec)
	rev.AgentID, rev.Version = c.ID, c.Version // for the admin who asked, whatever the document shows
	a.revokedMu.Lock()
	a.revokedList = nil
	a.revokedMu.Unlock()
	a.revocations.forget()
	a.pokeDuties()
	a.log.Warn("card revoked", "agent", c.ID, "version", c.Version, "canonical_sha256", fmt.Sprintf("%x", c.CanonicalSHA256), "reason", reason, "caller", caller)
	return rev, nil
}

// cardRevoked reports whether c's content is revoked. A stored card is in
// the v1.0 shape, one reading only, whose canonical SHA-256 is c's: the rule
// Verify applies to every reading of a card, for it.
func cardRevoked(revoked []store.CardRevocation, c store.AgentCard) bool {
	for _, r := range revoked {
		if bytes.Equal(r.CanonicalSHA256, c.CanonicalSHA256) {
			return true
		}
	}
	return false
}
