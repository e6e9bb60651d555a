package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cardsign/cardsign/store"
)

// ResignCaller is the caller named in the audit records of re-signatures the
// registry makes on key events.
const ResignCaller = "cardsignd/resign"

// DefaultRefreshAt is the fraction of signing.lifetime after which the
// registry signs a card again when the configuration does not say.
const DefaultRefreshAt = 0.5

// refreshAfter is how long after it was signed a registered card is signed
// again to stay fresh; 0 without a lifetime.
func (r *Registry) refreshAfter() time.Duration {
	if r.cfg.Lifetime <= 0 {
		return 0
	}
	f := r.cfg.RefreshAt
	if f <= 0 || f >= 1 {
		f = DefaultRefreshAt
	}
	return time.Duration(float64(r.cfg.Lifetime) * f)
}

// resignFullPass is how often the re-signing duty reads every registered
// card even when the signing keys did not change: a card registered by a
// replica that had not yet seen a key change carries the old keys.
const resignFullPass = time.Minute

// resignPage is how many registered cards the duty reads at a time, and
// resignWorkers how many it signs at once.
const (
	resignPage    = 200
	resignWorkers = 16
)

// resignState is the re-signing duty's memory between rounds (the duty
// holder's only; a new holder starts with a full pass).
type resignState struct {
	kids     string    // the signing keys of the last pass that left nothing to do
	passedAt time.Time // when that pass ended
}

// Resign is the registry's cluster duty: every live registered card
// must carry signatures by exactly the keys that sign now (the active key,
// and a pending one so that verifiers holding either find theirs). A card
// that does not (a key became pending, was activated, retired or revoked)
// is signed again from its stored input and options (Signer), audited as
// ResignCaller with the reason, and stored as the agent's next version. A
// retired key that live cards still carry (their re-signing failed) stays
// published (Keys.HoldRetired): its expiry is pushed RetireGrace ahead at
// each round, so the retirement clock starts once the last of them is
// re-signed. It is restartable: a card is judged by what it carries, so a
// pass cut short leaves the rest for the next round; a card whose audit
// records are committed is registered whatever happens to the pass's
// context, so only a process killed between the two signs a card (at most
// resignWorkers cards) twice.
func (r *Registry) Resign(ctx context.Context) error {
	now := r.cfg.Now()
	want, err := r.cfg.Keys.SigningKIDs(ctx, now)
	if err != nil {
		return err
	}
	want = slices.Sorted(slices.Values(want))
	wantText := strings.Join(want, ",")
	r.resignMu.Lock()
	st := r.resignSt
	r.resignMu.Unlock()
	if st.kids == wantText && time.Since(st.passedAt) < resignFullPass {
		return nil
	}
	revoked, err := r.RevokedCards(ctx)
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	var failed []error
	staleCards, resigned := 0, 0
	carried := map[string]bool{} // kids still carried by cards not re-signed
	for after := ""; ; {
		page, err := r.cfg.Agents.ListAgents(ctx, after, resignPage)
		if err != nil {
			return fmt.Errorf("registry: %w", err)
		}
		// The cards of a page are signed concurrently: each waits for its
		// audit record to be durable, and concurrent ones share commits.
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, resignWorkers)
		for _, c := range page {
			after = c.ID
			if CardRevoked(revoked, c) {
				continue // a revoked card is not signed again: its content is refused
			}
			have := slices.Sorted(slices.Values(c.KIDs))
			refresh := r.refreshAfter()
			stale := refresh > 0 && !c.StoredAt.Add(refresh).After(now)
			if slices.Equal(have, want) && !stale {
				continue
			}
			staleCards++
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				err := r.resignCard(ctx, c, want)
				mu.Lock()
				defer mu.Unlock()
				if errors.Is(err, store.ErrSuperseded) {
					// Registered again or removed meanwhile: the newer state
					// wins (its own signatures are judged next round).
					r.cfg.Resigned("superseded")
					return
				}
				if err != nil {
					failed = append(failed, fmt.Errorf("agent %s: %w", c.ID, err))
					r.cfg.Resigned("failed")
					for _, k := range c.KIDs {
						carried[k] = true
					}
					return
				}
				resigned++
				r.cfg.Resigned("resigned")
			}()
		}
		wg.Wait()
		if len(page) < resignPage {
			break
		}
	}
	r.cfg.Stale(staleCards - resigned)
	if resigned > 0 {
		r.cfg.Log.Info("registry: re-signed cards for the current signing keys", "cards", resigned, "kids", wantText)
	}
	if err := r.cfg.Keys.HoldRetired(ctx, carried); err != nil {
		failed = append(failed, err)
	}
	if len(failed) > 0 {
		return fmt.Errorf("registry: %d of %d cards not re-signed (retried every round): %w", len(failed), staleCards, errors.Join(failed...))
	}
	r.resignMu.Lock()
	r.resignSt = resignState{kids: wantText, passedAt: time.Now()}
	r.resignMu.Unlock()
	return nil
}

// resignCard signs one registered card again, as its agent's next version.
func (r *Registry) resignCard(ctx context.Context, c store.AgentCard, want []string) error {
	rs, err := NewResignature(c, want)
	if err != nil {
		return err
	}
	return r.cfg.Signer.SignAgain(ctx, rs)
}

// NewResignature is the re-signature of registered card c for the signing
// keys want: from its stored input and options, registered as the version
// after c's (store.ErrSuperseded when the agent has moved on meanwhile).
func NewResignature(c store.AgentCard, want []string) (Resignature, error) {
	var opts Options
	if len(c.Options) > 0 {
		if err := json.Unmarshal(c.Options, &opts); err != nil {
			return Resignature{}, fmt.Errorf("stored sign options: %w", err)
		}
	}
	return Resignature{
		Card: c.Input, Options: opts,
		RequestID:    resignReason(c, want),
		Registration: &Registration{AgentID: c.ID, Visibility: c.Visibility, replaces: c.Version, resign: true},
	}, nil
}

// resignReason is the audit record's request id of a re-signature: the
// agent, the version it replaces and the keys added and dropped, e.g.
// "resign.payments.v3.add.k2.drop.k1" (a request id is 1–128 of
// [A-Za-z0-9._-], so it shows on one line of audit list).
func resignReason(c store.AgentCard, want []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "resign.%s.v%d", c.ID, c.Version)
	changed := false
	for _, k := range want {
		if !slices.Contains(c.KIDs, k) {
			b.WriteString(".add." + k)
			changed = true
		}
	}
	for _, k := range c.KIDs {
		if !slices.Contains(want, k) {
			b.WriteString(".drop." + k)
			changed = true
		}
	}
	if !changed {
		b.WriteString(".refresh") // the same keys, before its signatures expire
	}
	out := []byte(b.String())
	for i, ch := range out {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			out[i] = '-'
		}
	}
	if len(out) > 128 {
		out = out[:128]
	}
	return string(out)
}
