package server

import (
	"context"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// SystemCaller is the caller an administrative audit record names when
// cardsignd acts on its own: the first key it creates, a retired key it
// keeps published, an in-process call with no gRPC caller.
const SystemCaller = "cardsignd"

// actor is who asked for an administrative action, as its audit record
// and log line name it.
type actor struct {
	caller, requestID, provenance string
}

// actorOf is the caller of ctx's gRPC call, or SystemCaller outside one.
func actorOf(ctx context.Context) actor {
	c := caller(ctx)
	if c == "" {
		return actor{caller: SystemCaller, requestID: requestID(ctx)}
	}
	return actor{caller: c, requestID: requestID(ctx), provenance: audit.EncodeProvenance(identity(ctx).Provenance)}
}

// keyRecord is the audit record of kind done by who to the key whose
// record is now rec, at t.
func (who actor) keyRecord(kind audit.Kind, rec jwks.KeyRecord, reason string, t time.Time) (audit.Record, error) {
	r, err := store.KeyAudit(kind, rec, who.caller, who.requestID, reason, t)
	r.Provenance = who.provenance
	return r, err
}

// changeKeys runs fn in a store.ChangeKeys transaction and tells the
// transparency log about the records it committed, as the batcher does for
// signatures.
func (a *Authority) changeKeys(ctx context.Context, mode store.KeyChangeMode, fn func(ctx context.Context, recs []jwks.KeyRecord) (store.KeyChange, error)) ([]audit.Record, error) {
	recs, err := a.store.ChangeKeys(ctx, mode, fn)
	if err == nil && a.tlog != nil && len(recs) > 0 {
		a.tlog.committed(recs)
	}
	return recs, err
}

// auditAdmin commits the audit record of a registry administration, after
// the action itself: a failure is reported as such, the action stands.
func (a *Authority) auditAdmin(ctx context.Context, rec audit.Record) error {
	if _, err := a.batcher.Commit(ctx, []audit.Record{rec}); err != nil {
		a.log.Error("an administrative action was done but its audit record was not committed", "action", rec.Outcome, "caller", rec.Caller, "err", err)
		return &UnavailableError{What: "audit log (the " + rec.Outcome + " was done, its audit record was not written)", Err: err}
	}
	return nil
}
