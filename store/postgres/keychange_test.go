package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/storetest"
)

// TestKeyCreationDoesNotHoldAppends: while a key creation's fn runs (a
// backend making a key, which may take a KMS round trip or hang), other
// processes' appends go on; a transition holds them, so that its time
// follows every record committed before it. The append inside fn would
// wait for the audit head's lock forever if a creation took it first: its
// deadline, far above what an append takes, only turns that into a failure.
func TestKeyCreationDoesNotHoldAppends(t *testing.T) {
	url := newDB(t)
	s, other := openT(t, url), openT(t, url)
	ctx := t.Context()
	now := time.Now().UTC()
	k := storetest.NewKey(t, "k1", now)
	sig := storetest.ScaleRecord(0, "k0") // a signature by a key of the set before k1
	_, err := s.ChangeKeys(ctx, store.KeyCreation, func(context.Context, []jwks.KeyRecord) (store.KeyChange, error) {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if _, err := other.AppendAudit(actx, []audit.Record{sig}); err != nil {
			return store.KeyChange{}, errors.Join(errors.New("an append waited for a key creation"), err)
		}
		r, err := store.KeyAudit(audit.KindKeyCreate, k, "admin", "", "", now)
		if err != nil {
			return store.KeyChange{}, err
		}
		return store.KeyChange{Create: &k, Audit: []audit.Record{r}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.ListAudit(ctx, 0, 0)
	if err != nil || len(recs) != 2 || recs[0].Kind() != audit.KindSigned || recs[1].Kind() != audit.KindKeyCreate {
		t.Fatalf("records %+v (%v): want the append, then the creation", recs, err)
	}
	if err := audit.VerifyChain(audit.Genesis(), recs); err != nil {
		t.Fatal(err)
	}
}
