package sqlrows

import (
	"context"
	"fmt"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
)

// AgentCardColumns are the agent_cards columns (table alias c), in the
// order AgentCards scans them.
const AgentCardColumns = `c.id, c.version, c.visibility, c.input, c.options, c.signed, c.canonical_sha256, c.kids, c.caller, c.audit_seq, c.stored_at`

// AgentCards reads agent cards with sql, a SELECT of AgentCardColumns.
func AgentCards(ctx context.Context, q Querier, v Values, sql string, args ...any) ([]store.AgentCard, error) {
	return query(ctx, q, func(rows Rows) (store.AgentCard, error) {
		var c store.AgentCard
		var vis string
		kidsDest, kids := v.Strings()
		storedDest, stored := v.Time()
		if err := rows.Scan(&c.ID, &c.Version, &vis, &c.Input, &c.Options, &c.Signed, &c.CanonicalSHA256, kidsDest, &c.Caller, &c.AuditSeq, storedDest); err != nil {
			return store.AgentCard{}, err
		}
		c.Visibility = store.Visibility(vis)
		var err error
		if c.KIDs, err = kids(); err != nil {
			return store.AgentCard{}, fmt.Errorf("agent %s version %d: kids: %w", c.ID, c.Version, err)
		}
		if c.StoredAt, err = stored(); err != nil {
			return store.AgentCard{}, fmt.Errorf("agent %s version %d: stored_at: %w", c.ID, c.Version, err)
		}
		return c, nil
	}, sql, args...)
}

// CardRevocationColumns are the revoked_cards columns, in the order
// CardRevocations scans them.
const CardRevocationColumns = `canonical_sha256, agent_id, version, reason, revoked_at`

// CardRevocations reads card revocations with sql, a SELECT of
// CardRevocationColumns.
func CardRevocations(ctx context.Context, q Querier, v Values, sql string, args ...any) ([]store.CardRevocation, error) {
	return query(ctx, q, func(rows Rows) (store.CardRevocation, error) {
		var c store.CardRevocation
		atDest, at := v.Time()
		if err := rows.Scan(&c.CanonicalSHA256, &c.AgentID, &c.Version, &c.Reason, atDest); err != nil {
			return store.CardRevocation{}, err
		}
		var err error
		c.RevokedAt, err = at()
		return c, err
	}, sql, args...)
}

// PrepareAgentRemoval is the part of store.Agents.RemoveAgent both stores
// do alike, inside the store's transaction tx and under its locks: it reads
// agent id's newest version with newest (a SELECT of AgentCardColumns
// taking id), has record make the removal's audit record of it, and checks
// that record (store.PrepareRegistryAudit), returning it and its time. No
// version fails with store.ErrNotFound. A record error is stored in
// *recErr (the caller's error, returned as is) and returned.
func PrepareAgentRemoval(ctx context.Context, tx Querier, v Values, newest, id string, record func(newest store.AgentCard) (audit.Record, error), recErr *error) ([]audit.Record, []int64, error) {
	cards, err := AgentCards(ctx, tx, v, newest, id)
	if err != nil {
		return nil, nil, err
	}
	if len(cards) == 0 {
		return nil, nil, store.ErrNotFound
	}
	rec, err := record(cards[0])
	if err != nil {
		*recErr = err
		return nil, nil, err
	}
	return store.PrepareRegistryAudit(rec, audit.KindAgentRemove)
}
