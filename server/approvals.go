package server

import (
	"context"
	"errors"

	"github.com/cardsign/cardsign/approval"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
)

// newApprovals wires the approvals desk over the authority's store,
// policy, registry, clock, log and metrics.
func newApprovals(a *Authority) *approval.Desk {
	return approval.New(approval.Config{
		Store: a.store, Policy: a.cfg.Policy, Now: a.now, Log: a.log,
		Previous: func(ctx context.Context, agent string) (strictjson.Value, error) {
			prev, err := a.registry.Card(ctx, agent, 0)
			if errors.Is(err, store.ErrNotFound) {
				return strictjson.Value{}, nil
			}
			if err == nil {
				var v strictjson.Value
				if v, err = strictjson.Parse(prev.Input, strictjson.Limits{}); err == nil {
					return v, nil
				}
			}
			return strictjson.Value{}, &UnavailableError{What: "registry (the previous card a policy rule compares with)", Err: err}
		},
		AgentOf: func(v strictjson.Value) string {
			id, _ := registry.DeriveAgentID(v)
			return id
		},
		Committed: func(rec audit.Record) {
			if a.logCommitted != nil { // the log and the event sinks
				a.logCommitted([]audit.Record{rec})
			}
		},
		Count: func(step string) { a.metrics.approvals.WithLabelValues(step).Inc() },
	})
}

// gateSign runs the approvals desk's gate over a card the permission rules
// allowed (id: the agent it is registered under, "" when it is not): nil
// when it may be signed now, an audited *RefusedError, or the desk's
// error (an *approval.RequiredError to wait on).
func gateSign(ctx context.Context, a *Authority, req SignRequest, p *signer.Prepared, id string, hosts []string) error {
	if req.resign {
		return nil // the card was allowed when its caller registered it
	}
	r := approval.Request{
		Identity: req.Identity, RequestID: req.RequestID, Card: req.Card, Value: p.Loaded.Value, Digest: p.CanonicalSHA256,
		AgentID: id, Profile: string(req.Mode), ApprovalID: req.ApprovalID, Record: recordFor(a.now(), req, p, hosts),
	}
	if req.Registration != nil {
		r.Visibility = string(req.Registration.Visibility)
	}
	err := a.approvals.Gate(ctx, r)
	if refusal := (*policy.Refusal)(nil); errors.As(err, &refusal) {
		rec := r.Record
		rec.Outcome, rec.Reason = audit.OutcomeRefused, refusal.Error()
		return a.auditRefusal(ctx, rec, refusal)
	}
	return err
}
