package server

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/policy"
)

func TestPolicyRefusalIsAudited(t *testing.T) {
	ctx := t.Context()
	a, _ := newAuthority(t)
	teamAPolicy(t, a)
	card := []byte(`{"name":"A","description":"d","supportedInterfaces":[{"url":"https://evil.example.net/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)
	id := access.Identity{Name: "token:team-a", Method: access.MethodToken, Roles: []access.Role{access.RoleSigner}}
	_, err := a.Sign(ctx, SignRequest{Card: card, Caller: id.Name, Identity: id, RequestID: "r1"})
	var refused *RefusedError
	// Record 1 is the first key's creation.
	if !errors.As(err, &refused) || refused.Refusal.Rule != "team-a" || refused.Seq != 2 {
		t.Fatalf("want a refusal by team-a audited as record 2, got %v", err)
	}
	recs, err := a.store.ListAudit(ctx, 1, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("audit: %v %v", recs, err)
	}
	r := recs[0]
	if r.Outcome != audit.OutcomeRefused || r.Caller != "token:team-a" || r.RequestID != "r1" || r.CardName != "A" || r.KID != "" || len(r.CanonicalSHA256) != 32 || r.Reason != refused.Error() {
		t.Fatalf("refused record: %+v", r)
	}
	// The same card for a host the rule allows is signed and chained after.
	ok := []byte(strings.Replace(string(card), "evil.example.net", "api.team-a.example.com", 1))
	res, err := a.Sign(ctx, SignRequest{Card: ok, Caller: id.Name, Identity: id})
	if err != nil || res.Audit[0].Seq != 3 {
		t.Fatalf("allowed card: %v", err)
	}
}

// teamAPolicy lets token:team-a sign cards on *.team-a.example.com alone.
func teamAPolicy(t *testing.T, a *Authority) {
	t.Helper()
	pol, probs := policy.Compile(policy.Config{Rules: []policy.Rule{{
		Name: "team-a", Identities: []string{"token:team-a"}, CardNames: []string{"*"}, Hosts: []string{"*.team-a.example.com"},
	}}})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	a.cfg.Policy = pol
}

// TestRevokeWhileSigning revokes a key that is signing while ten callers sign.
// Once RevokeKey has returned, no signature by that key may come back, every
// audit record by it must precede the revocation (committed before it, with
// an earlier time), and callers must not see the revocation as an error: a
// signature that lost the race is made again with the keys that remain.
func TestRevokeWhileSigning(t *testing.T) {
	ctx := t.Context()
	a, _ := newAuthority(t)
	data := testsupport.Card(t, "spec-sample.json")
	const rounds, callers = 8, 10
	for round := range rounds {
		// A pending key signs beside the active one until it is revoked.
		pending, err := a.admin.RotateKey(ctx, "", durationPtr(3600e9))
		if err != nil {
			t.Fatalf("round %d: rotate: %v", round, err)
		}
		kid := pending.KID

		var (
			stop      atomic.Bool
			revoked   atomic.Bool // set once RevokeKey has returned
			wg        sync.WaitGroup
			mu        sync.Mutex
			failures  []error
			lateSigns int // signatures by kid from calls that began after RevokeKey returned
			byKID     int // signatures by kid returned at all
		)
		started := make(chan struct{}, callers)
		for range callers {
			wg.Go(func() {
				first := true
				for !stop.Load() {
					after := revoked.Load()
					res, err := a.Sign(ctx, SignRequest{Card: data, Caller: "race", StripUnknown: true})
					if first {
						started <- struct{}{}
						first = false
					}
					mu.Lock()
					if err != nil {
						failures = append(failures, err)
					} else {
						for _, s := range res.Signatures {
							if s.KID == kid {
								byKID++
								if after {
									lateSigns++
								}
							}
						}
					}
					mu.Unlock()
				}
			})
		}
		for range callers {
			<-started // every caller has signed once: the pending key is in use
		}
		mu.Lock()
		if len(failures) > 0 {
			mu.Unlock()
			stop.Store(true)
			wg.Wait()
			t.Fatalf("round %d: signing before the revocation: %v", round, failures[0])
		}
		mu.Unlock()
		v, err := a.admin.RevokeKey(ctx, kid, "unspecified: race test", false)
		revoked.Store(true)
		if err != nil {
			t.Fatalf("round %d: revoke: %v", round, err)
		}
		head, err := a.store.ListAudit(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		seqAtReturn := head[len(head)-1].Seq
		for range 20 { // let the callers go on past the revocation
			if _, err := a.Sign(ctx, SignRequest{Card: data, Caller: "after", StripUnknown: true}); err != nil {
				t.Fatalf("round %d: signing after the revocation: %v", round, err)
			}
		}
		stop.Store(true)
		wg.Wait()

		if len(failures) > 0 {
			t.Fatalf("round %d: %d signing calls failed across the revocation, first: %v", round, len(failures), failures[0])
		}
		if lateSigns > 0 {
			t.Fatalf("round %d: %d signatures by %s returned to calls made after RevokeKey returned", round, lateSigns, kid)
		}
		if byKID == 0 {
			t.Fatalf("round %d: no signature by the revoked key at all: the race was not run", round)
		}
		recs, err := a.store.ListAudit(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.KID != kid || r.Kind() != audit.KindSigned { // the key's own administration records name it too
				continue
			}
			if r.Seq > seqAtReturn {
				t.Fatalf("round %d: audit record %d by %s committed after RevokeKey returned (head was %d)", round, r.Seq, kid, seqAtReturn)
			}
			if !r.Time.Before(*v.RevokedAt) {
				t.Fatalf("round %d: audit record %d by %s at %s, not before its revocation at %s", round, r.Seq, kid, r.Time, *v.RevokedAt)
			}
		}
		if v.State != jwks.StateRevoked {
			t.Fatalf("round %d: %s is %s after RevokeKey, want revoked", round, kid, v.State)
		}
	}
}
