package approval

import (
	"context"
	"log/slog"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
)

// Config is what a Desk works with: its ports to the rest of the daemon.
type Config struct {
	// Store keeps the approvals and their votes, each step with its audit
	// record.
	Store store.Approvals
	// Policy decides; a nil or unconditional policy holds nothing.
	Policy *policy.Policy
	// Previous returns agent's latest registered card (its input, in the
	// v1.0 shape), or JSON null when it has none; an error fails the
	// request (the rules cannot be decided without it).
	Previous func(ctx context.Context, agent string) (strictjson.Value, error)
	// AgentOf derives the agent id of a card signed without registering
	// (the registry's derivation), "" when none can be.
	AgentOf func(card strictjson.Value) string
	// Now is the authority's clock.
	Now func() time.Time
	// Committed hears of the audit records the store committed with a
	// step (the transparency log); nil: no one.
	Committed func(audit.Record)
	// Count counts a step: requested, approved, denied, refused; nil: no
	// one.
	Count func(step string)
	Log   *slog.Logger
}

// Desk holds signatures for approval and takes the votes; safe for
// concurrent use.
type Desk struct{ cfg Config }

// New returns a desk over cfg.
func New(cfg Config) *Desk {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Committed == nil {
		cfg.Committed = func(audit.Record) {}
	}
	if cfg.Count == nil {
		cfg.Count = func(string) {}
	}
	return &Desk{cfg: cfg}
}

// Caller is how the signing policy sees an identity.
func Caller(id access.Identity) policy.Caller {
	return policy.Caller{Identity: id.Name, Roles: id.RoleNames(), Claims: id.Claims, Method: string(id.Method), Provenance: id.Provenance}
}

// readsAll reports whether who may read approvals other than its own.
func readsAll(who access.Identity) bool {
	return who.Has(access.RoleApprover) || who.Has(access.RoleAuditor) || who.Has(access.RoleAdmin)
}

// List returns the approvals f selects (expiry decided at the desk's
// clock); a caller that is only a signer sees its own requests.
func (d *Desk) List(ctx context.Context, who access.Identity, f store.ApprovalFilter) ([]store.Approval, error) {
	if !readsAll(who) {
		if f.Requester != "" && f.Requester != who.Name {
			return nil, &ForbiddenError{Reason: "a signer lists only its own approvals; approvers, auditors and admins list everyone's"}
		}
		f.Requester = who.Name
	}
	if f.Before != "" {
		// An unknown id would page to nothing, silently.
		if err := CheckID("before", f.Before); err != nil {
			return nil, err
		}
		// A signer pages only from its own: another's id answers as one
		// that does not exist (ids cannot be probed).
		before, err := d.cfg.Store.Approval(ctx, f.Before)
		if isNotFound(err) || err == nil && !readsAll(who) && before.Requester != who.Name {
			return nil, &InvalidError{Field: "before", Reason: "no approval " + f.Before + " to page from"}
		} else if err != nil {
			return nil, unavailable(err)
		}
	}
	f.Now = d.cfg.Now()
	return d.cfg.Store.ListApprovals(ctx, f)
}

// Get returns approval id; a caller that is only a signer reads its own,
// and is told of others' as of ids that do not exist (they cannot be
// probed).
func (d *Desk) Get(ctx context.Context, who access.Identity, id string) (store.Approval, error) {
	if err := CheckID("id", id); err != nil {
		return store.Approval{}, err
	}
	ap, err := d.cfg.Store.Approval(ctx, id)
	if err != nil {
		return store.Approval{}, err
	}
	if !readsAll(who) && ap.Requester != who.Name {
		return store.Approval{}, notFound(id)
	}
	return ap, nil
}

// State is an approval's state as callers see it: "expired" for one past
// its expiry that was never denied.
func (d *Desk) State(ap store.Approval) string {
	if ap.State != store.ApprovalDenied && ap.Expired(d.cfg.Now()) {
		return store.ApprovalExpired
	}
	return ap.State
}
