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

// adminCommitted tells the transparency log about the audit record of a
// registry administration, committed by the store with the action itself
// (Store.RemoveAgent, Store.RevokeCard), as changeKeys does for keys.
func (a *Authority) adminCommitted(rec audit.Record) {
	if a.tlog != nil {
		a.tlog.committed([]audit.Record{rec})
	}
}
