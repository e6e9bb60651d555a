package jwks

import (
	"cmp"
	"slices"
	"time"
)

// State is the lifecycle state of a key version at some instant. It is never
// stored: Derive computes it from a KeyRecord's timestamps, so every replica
// and every restart that reads the same records at the same instant agrees,
// without messages between them (DESIGN §5).
type State string

// The states, in the order a key normally passes through them.
const (
	StateScheduled State = "scheduled" // PublishAt is in the future: not in the JWKS yet
	StatePending   State = "pending"   // published, not signing yet
	StateActive    State = "active"    // the one signer
	StateRetired   State = "retired"   // published, verify only
	StateExpired   State = "expired"   // unpublished
	StateRevoked   State = "revoked"   // unpublished at once, listed in the revocation document, terminal
)

// Policy holds the lifecycle settings that are configuration, not per-key
// data. Every replica must use the same Policy to derive the same states.
type Policy struct {
	// RetireGrace is how long a retired key stays published, so that cards
	// signed just before the switch still verify against cached JWKS. A
	// negative value counts as zero.
	RetireGrace time.Duration
}

// View is a KeyRecord with what Derive computed from it at one instant.
type View struct {
	KeyRecord
	State State
	// RetiredAt is the effective retirement: the explicit RetireAt once it
	// has passed, or the activation of the next key (supersession), whichever
	// came first. It is nil while the key is not retired.
	RetiredAt *time.Time
	// ExpiresAt is the effective end of publication: the explicit ExpireAt,
	// else RetiredAt + RetireGrace. nil when neither is known yet.
	ExpiresAt *time.Time
}

// Derive computes the state of every record at now, in the order of recs.
// The result depends only on now, the records and p: not on the order of
// recs, the wall clock or any earlier call. KIDs are assumed unique (the
// store never reuses one); Render refuses a set where they are not.
//
// The rules, in terms of a record's timestamps:
//
//   - Activation. A key's activation time is A = max(ActivateAt, PublishAt):
//     a key never signs before it is published, or verifiers could not find
//     it. The key has activated when A ≤ now and it was not revoked, retired
//     or expired (explicit RevokedAt, RetireAt, ExpireAt) strictly before A.
//     A key stopped while pending therefore never activates, and never
//     displaces the active key.
//   - Supersession. Activated keys are ordered by (A, KID). A key is
//     superseded at S, the A of the next activated key in that order, even if
//     that key has since been revoked or expired: a retired key is never
//     resurrected. Ties in A are broken by KID, the larger KID winning.
//   - RetiredAt = min(RetireAt if RetireAt ≤ now, S). ExpiresAt = ExpireAt
//     if set, else RetiredAt + RetireGrace.
//   - State, first match wins:
//     revoked   when RevokedAt ≤ now (terminal: never published or active again);
//     expired   when ExpiresAt ≤ now;
//     scheduled when PublishAt > now;
//     retired   when RetiredAt is set (it is never in the future);
//     active    when the key has activated;
//     pending   otherwise (published; ActivateAt nil or in the future).
//
// By construction at most one key is active: the last activated one in
// (A, KID) order, and only if it is not revoked, retired or expired. When
// that key is revoked no key is active: signing stops until a new key
// activates, rather than falling back to an older key that was already
// retired.
func Derive(now time.Time, recs []KeyRecord, p Policy) []View {
	grace := max(p.RetireGrace, 0)
	type act struct {
		i   int
		at  time.Time
		kid string
	}
	var acts []act
	for i := range recs {
		if a, ok := activatedAt(recs[i], now); ok {
			acts = append(acts, act{i, a, recs[i].KID})
		}
	}
	slices.SortFunc(acts, func(x, y act) int {
		return cmp.Or(x.at.Compare(y.at), cmp.Compare(x.kid, y.kid))
	})
	superseded := make(map[int]time.Time, len(acts))
	for j := 0; j+1 < len(acts); j++ {
		superseded[acts[j].i] = acts[j+1].at
	}

	views := make([]View, len(recs))
	for i, r := range recs {
		v := View{KeyRecord: r}
		if r.RetireAt != nil && !r.RetireAt.After(now) {
			v.RetiredAt = ptr(*r.RetireAt)
		}
		if s, ok := superseded[i]; ok && (v.RetiredAt == nil || s.Before(*v.RetiredAt)) {
			v.RetiredAt = ptr(s)
		}
		switch {
		case r.ExpireAt != nil:
			v.ExpiresAt = ptr(*r.ExpireAt)
		case v.RetiredAt != nil:
			v.ExpiresAt = ptr(v.RetiredAt.Add(grace))
		}
		_, activated := activatedAt(r, now)
		switch {
		case r.RevokedAt != nil && !r.RevokedAt.After(now):
			v.State = StateRevoked
		case v.ExpiresAt != nil && !v.ExpiresAt.After(now):
			v.State = StateExpired
		case r.PublishAt.After(now):
			v.State = StateScheduled
		case v.RetiredAt != nil:
			v.State = StateRetired
		case activated:
			v.State = StateActive
		default:
			v.State = StatePending
		}
		views[i] = v
	}
	return views
}

// activationTime is when r starts signing if nothing stops it first:
// ActivateAt, but never before PublishAt.
func activationTime(r KeyRecord) (time.Time, bool) {
	if r.ActivateAt == nil {
		return time.Time{}, false
	}
	if r.PublishAt.After(*r.ActivateAt) {
		return r.PublishAt, true
	}
	return *r.ActivateAt, true
}

// activatedAt reports whether r has activated by now, and when.
func activatedAt(r KeyRecord, now time.Time) (time.Time, bool) {
	a, ok := activationTime(r)
	if !ok || a.After(now) {
		return time.Time{}, false
	}
	for _, stop := range []*time.Time{r.RevokedAt, r.RetireAt, r.ExpireAt} {
		if stop != nil && stop.Before(a) {
			return time.Time{}, false
		}
	}
	return a, true
}

// Active returns the active key, if there is one.
func Active(views []View) (View, bool) {
	for _, v := range views {
		if v.State == StateActive {
			return v, true
		}
	}
	return View{}, false
}

// Signing returns the keys a new card is signed with: the active key first,
// then the pending keys that are scheduled to activate (ActivateAt set), in
// activation order (ties by KID). While a key is pending, new cards carry
// both signatures, so no card breaks when it takes over (DESIGN §5).
//
// With no active key Signing returns nil, even if keys are pending: signing
// stops until a key is active (the daemon answers FAILED_PRECONDITION), as
// after a forced revocation of the only active key.
func Signing(views []View) []View {
	active, ok := Active(views)
	if !ok {
		return nil
	}
	out := []View{active}
	var pending []View
	for _, v := range views {
		if v.State == StatePending && v.ActivateAt != nil {
			pending = append(pending, v)
		}
	}
	slices.SortFunc(pending, func(x, y View) int {
		ax, _ := activationTime(x.KeyRecord)
		ay, _ := activationTime(y.KeyRecord)
		return cmp.Or(ax.Compare(ay), cmp.Compare(x.KID, y.KID))
	})
	return append(out, pending...)
}

// Published returns the keys that belong in the JWKS (pending, active,
// retired), in the order of views.
func Published(views []View) []View {
	var out []View
	for _, v := range views {
		switch v.State {
		case StatePending, StateActive, StateRetired:
			out = append(out, v)
		}
	}
	return out
}

// NextTransition returns the earliest instant after now at which the state
// of any key changes, and false when no change is scheduled. Caches (JWKS
// max-age) and timers use it so that nothing outlives the current key set.
//
// States only change at instants drawn from the records: each timestamp,
// each activation time, and each possible retirement plus RetireGrace.
// Between two consecutive such instants every comparison Derive makes has
// the same outcome, so it is enough to derive the states at each candidate
// in turn and return the first one at which they differ from now.
func NextTransition(now time.Time, recs []KeyRecord, p Policy) (time.Time, bool) {
	grace := max(p.RetireGrace, 0)
	var cands []time.Time
	add := func(t *time.Time) {
		if t != nil && t.After(now) {
			cands = append(cands, *t)
		}
	}
	for _, r := range recs {
		add(&r.PublishAt)
		add(r.RetireAt)
		add(r.ExpireAt)
		add(r.RevokedAt)
		if r.RetireAt != nil {
			add(ptr(r.RetireAt.Add(grace)))
		}
		if a, ok := activationTime(r); ok {
			add(&a)
			add(ptr(a.Add(grace)))
		}
	}
	slices.SortFunc(cands, time.Time.Compare)
	cands = slices.CompactFunc(cands, time.Time.Equal)

	base := Derive(now, recs, p)
	for _, c := range cands {
		next := Derive(c, recs, p)
		for i := range base {
			if next[i].State != base[i].State {
				return c, true
			}
		}
	}
	return time.Time{}, false
}

func ptr[T any](v T) *T { return &v }
