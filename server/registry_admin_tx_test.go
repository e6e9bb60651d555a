package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
)

// appendsFail is a store whose AppendAudit fails once fail is set, as a
// transaction of its own fails when the store goes down or its disk fills
// up between two transactions.
type appendsFail struct {
	store.Store
	fail atomic.Bool
}

func (s *appendsFail) AppendAudit(ctx context.Context, recs []audit.Record) ([]audit.Record, error) {
	if s.fail.Load() {
		return nil, errors.New("audit append failed in a test")
	}
	return s.Store.AppendAudit(ctx, recs)
}

// TestRegistryAdministrationOneTransaction: a card revocation and an agent
// removal are done with their audit record or not at all (item 5, DESIGN
// §10): with every separate audit append failing, each is done and audited
// in its own transaction; never done without its record.
func TestRegistryAdministrationOneTransaction(t *testing.T) {
	dir := t.TempDir()
	sq := openStore(t, dir)
	st := &appendsFail{Store: sq}
	a := newAuthorityOn(t, st, dir)
	ctx := t.Context()
	registerAgents(t, a, "payments", "billing")
	st.fail.Store(true)

	recorded := func(kind audit.Kind, agent string) bool {
		t.Helper()
		recs := chainedAudit(t, sq)
		for _, r := range recs {
			if d, err := audit.DecodeAgentDetail(r.Detail); r.Kind() == kind && err == nil && d.Agent == agent {
				return true
			}
		}
		return false
	}

	_, err := a.Agents().RevokeAgentCard(ctx, "payments", 0, "leaked", "token:admin")
	revs, rerr := sq.RevokedCards(ctx)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if done, audited := len(revs) == 1, recorded(audit.KindCardRevoke, "payments"); done != audited || (err == nil) != done {
		t.Fatalf("card revocation: error %v, revoked %v, audited %v; want it done and audited, or neither", err, done, audited)
	}
	if err != nil {
		t.Fatal(err)
	}

	err = a.registry.Remove(ctx, "billing", "token:root")
	_, gerr := sq.AgentCard(ctx, "billing", 0)
	if gerr != nil && !errors.Is(gerr, store.ErrNotFound) {
		t.Fatal(gerr)
	}
	if done, audited := gerr != nil, recorded(audit.KindAgentRemove, "billing"); done != audited || (err == nil) != done {
		t.Fatalf("agent removal: error %v, removed %v, audited %v; want it done and audited, or neither", err, done, audited)
	}
	if err != nil {
		t.Fatal(err)
	}
}
