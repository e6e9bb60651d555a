package server

import (
	"context"
	"fmt"
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
	c := CallOf(ctx)
	if c.Caller == "" {
		return actor{caller: SystemCaller, requestID: c.RequestID}
	}
	return actor{caller: c.Caller, requestID: c.RequestID, provenance: audit.EncodeProvenance(c.Identity.Provenance)}
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
func (k *KeyAdmin) changeKeys(ctx context.Context, mode store.KeyChangeMode, fn func(ctx context.Context, recs []jwks.KeyRecord) (store.KeyChange, error)) ([]audit.Record, error) {
	recs, err := k.st.ChangeKeys(ctx, mode, fn)
	if err == nil && k.logged != nil && len(recs) > 0 {
		k.logged(recs)
	}
	return recs, err
}

// baselineKeys appends a key.baseline record (caller cardsignd) of every
// key that no key administration record names: keys made by a release
// before those records existed, in a store upgraded since. It appends
// them once, at the first start after the upgrade (replicas starting
// together append one baseline), stating each key as it is then; from
// there on store.KeyTrail takes no key as legacy, so a key record edited
// behind cardsignd's back disagrees with the trail like any other.
func (k *KeyAdmin) baselineKeys(ctx context.Context) error {
	who := actor{caller: SystemCaller}
	at := k.now()
	recs, err := k.st.BaselineKeys(ctx, func(k jwks.KeyRecord) (audit.Record, error) {
		return who.keyRecord(audit.KindKeyBaseline, k, "", at)
	})
	if err != nil {
		return fmt.Errorf("recording the keys from before key administration was audited: %w", err)
	}
	if len(recs) == 0 {
		return nil
	}
	if k.logged != nil {
		k.logged(recs)
	}
	kids := make([]string, len(recs))
	for i, r := range recs {
		kids[i] = r.KID
	}
	k.log.Info("recorded the keys from before key administration was audited, as they are now (key.baseline)",
		"keys", kids, "first_record", recs[0].Seq, "caller", who.caller)
	return nil
}
