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
func (rs *resigner) refreshAfter() time.Duration {
	r := rs.r
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

// ResignSlice is how long one Resign call admits cards by default to be signed again:
// a pass over a large registry at a KMS's quota takes longer than the
// duties lease lasts between renewals, so Resign stops admitting cards
// after ResignSlice (those in flight finish) and returns
// ErrResignUnfinished; its caller renews the lease (and does its other
// duties) and calls again at once. Below the lease's spare time
// (leaseTTL − leaseRenew in server).
const ResignSlice = 8 * time.Second

// ErrResignUnfinished: Resign stopped admitting cards after ResignSlice
// with cards left to judge; call it again (at once: they wait).
var ErrResignUnfinished = errors.New("registry: re-signing pass unfinished after its time slice; the rest follows at once")

// resignPage is how many registered cards the duty reads at a time.
const resignPage = 200

// maxResignPasses bounds the passes of one Resign that start over because
// the signing keys changed while they ran.
const maxResignPasses = 4

// resignState is the re-signing duty's memory between rounds (the duty
// holder's only; a new holder starts with a full pass).
type resignState struct {
	kids     string    // the signing keys of the last pass that left nothing to do
	passedAt time.Time // when that pass ended
}

// resigner is the registry's re-signing duty: its pace and its memory
// between rounds.
type resigner struct {
	r     *Registry
	pace  *Pace
	slice time.Duration // how long one run admits cards

	mu sync.Mutex
	st resignState
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
// the pace's window of cards) twice.
//
// It signs at the backend's pace (Pace): many cards in flight, concurrent
// ones sharing their audit commits (the authority's batcher), fewer when
// the backend throttles, after the pipeline signs' share of the rate. The
// keys are read again before each card, so a change during a pass (a
// rotation then the revocation of the old key) retargets the rest of it:
// those cards are signed once, for the keys as they are now; the cards
// signed before the change are signed again by a pass that follows at
// once, until a pass sees no change.
func (r *Registry) Resign(ctx context.Context) error { return r.resign.run(ctx) }

// run is Resign.
func (rs *resigner) run(ctx context.Context) error {
	r := rs.r
	want, err := rs.signingKIDs(ctx)
	if err != nil {
		return err
	}
	wantText := strings.Join(want, ",")
	rs.mu.Lock()
	st := rs.st
	rs.mu.Unlock()
	if st.kids == wantText && time.Since(st.passedAt) < resignFullPass {
		return nil
	}
	until := time.Now().Add(rs.slice)
	for passes := 1; ; passes++ {
		p, err := rs.pass(ctx, want, until)
		if err != nil {
			return fmt.Errorf("registry: %w", err)
		}
		if p.cut && ctx.Err() == nil {
			// Not a whole pass: nothing to remember, the next call goes
			// on (the cards signed meanwhile carry the keys now and are
			// skipped).
			r.cfg.Stale(p.stale - p.resigned)
			if len(p.failed) > 0 {
				return fmt.Errorf("registry: %d of %d cards not re-signed (retried every round): %w", len(p.failed), p.stale, errors.Join(p.failed...))
			}
			return ErrResignUnfinished
		}
		now, err := rs.signingKIDs(ctx)
		if err != nil {
			return err
		}
		if len(p.failed) == 0 && !slices.Equal(now, want) && passes < maxResignPasses && ctx.Err() == nil {
			// The keys changed during the pass: the cards signed
			// before the change carry the old ones.
			r.cfg.Log.Info("registry: the signing keys changed during a re-signing pass; passing again", "cards", p.resigned, "kids", strings.Join(now, ","))
			want = now
			continue
		}
		return rs.end(ctx, p, strings.Join(p.want, ","))
	}
}

// signingKIDs returns the kids of the keys that sign now, sorted.
func (rs *resigner) signingKIDs(ctx context.Context) ([]string, error) {
	r := rs.r
	want, err := r.cfg.Keys.SigningKIDs(ctx, r.cfg.Now())
	if err != nil {
		return nil, err
	}
	slices.Sort(want)
	return want, nil
}

// passResult is what one pass over the registered cards did.
type passResult struct {
	want            []string // the signing keys as the pass last read them
	stale, resigned int
	failed          []error
	carried         map[string]bool // kids still carried by cards not re-signed
	cut             bool            // stopped admitting cards at the slice's end, cards left
	mu              sync.Mutex
	wg              sync.WaitGroup
}

// pass reads every registered card, a page at a time, and signs
// again, at the pace's rate, each live one that does not carry exactly the
// signing keys (read again before each card), or whose signatures are due
// a refresh.
func (rs *resigner) pass(ctx context.Context, want []string, until time.Time) (*passResult, error) {
	r := rs.r
	revoked, err := r.RevokedCards(ctx)
	if err != nil {
		return nil, err
	}
	p := &passResult{want: want, carried: map[string]bool{}}
	defer p.wg.Wait()
	refresh := rs.refreshAfter()
	// Cards are admitted until the slice ends; a card admitted is signed
	// under ctx, so it completes (or fails) whatever the slice.
	admit, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	for after := ""; ctx.Err() == nil && !p.cut; {
		page, err := r.cfg.Agents.ListAgents(ctx, after, resignPage)
		if err != nil {
			return nil, err
		}
		for _, c := range page {
			after = c.ID
			if CardRevoked(revoked, c) {
				continue // a revoked card is not signed again: its content is refused
			}
			if p.want, err = rs.signingKIDs(ctx); err != nil {
				return nil, err
			}
			stale := refresh > 0 && !c.StoredAt.Add(refresh).After(r.cfg.Now())
			if slices.Equal(slices.Sorted(slices.Values(c.KIDs)), p.want) && !stale {
				continue
			}
			actx := admit
			if p.stale == 0 {
				actx = ctx // one card at least per call: a slice always makes progress
			}
			if err := rs.pace.Acquire(actx, len(p.want)); err != nil {
				// ctx ended, or the slice did: the rest is the next
				// call's.
				p.cut = true
				break
			}
			p.stale++
			p.wg.Add(1)
			go func(want []string) {
				defer p.wg.Done()
				err := rs.card(ctx, c, want)
				rs.pace.Done()
				p.record(r, c, err)
			}(p.want)
		}
		if len(page) < resignPage {
			break
		}
	}
	return p, nil
}

// record counts the outcome of one card's re-signature.
func (p *passResult) record(r *Registry, c store.AgentCard, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case errors.Is(err, store.ErrSuperseded):
		// Registered again or removed meanwhile: the newer state wins
		// (its own signatures are judged next round).
		r.cfg.Resigned("superseded")
	case err != nil:
		p.failed = append(p.failed, fmt.Errorf("agent %s: %w", c.ID, err))
		r.cfg.Resigned("failed")
		for _, k := range c.KIDs {
			p.carried[k] = true
		}
	default:
		p.resigned++
		r.cfg.Resigned("resigned")
	}
}

// end reports the last pass of a Resign, holds the retired keys its
// failed cards still carry, and remembers a pass that left nothing to do.
func (rs *resigner) end(ctx context.Context, p *passResult, wantText string) error {
	r := rs.r
	r.cfg.Stale(p.stale - p.resigned)
	if p.resigned > 0 {
		r.cfg.Log.Info("registry: re-signed cards for the current signing keys", "cards", p.resigned, "kids", wantText)
	}
	failed := p.failed
	if err := r.cfg.Keys.HoldRetired(ctx, p.carried); err != nil {
		failed = append(failed, err)
	}
	if len(failed) > 0 {
		return fmt.Errorf("registry: %d of %d cards not re-signed (retried every round): %w", len(p.failed), p.stale, errors.Join(failed...))
	}
	if ctx.Err() != nil {
		return ctx.Err() // cut short: the rest is the next round's
	}
	rs.mu.Lock()
	rs.st = resignState{kids: wantText, passedAt: time.Now()}
	rs.mu.Unlock()
	return nil
}

// card signs one registered card again, as its agent's next version.
func (rs *resigner) card(ctx context.Context, c store.AgentCard, want []string) error {
	sig, err := NewResignature(c, want)
	if err != nil {
		return err
	}
	return rs.r.cfg.Signer.SignAgain(ctx, sig)
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
