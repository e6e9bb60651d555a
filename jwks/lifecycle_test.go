package jwks

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// t0 is the origin of every timeline in these tests.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// at returns t0 + d; tp returns it as a pointer, for the optional timestamps.
func at(d time.Duration) time.Time  { return t0.Add(d) }
func tp(d time.Duration) *time.Time { t := at(d); return &t }

const (
	hour  = time.Hour
	grace = 10 * hour
	rotT  = 100 * hour // the moment the new key activates in the rotation timeline
)

var testPolicy = Policy{RetireGrace: grace}

// rec builds a record; opts fill in the optional timestamps.
func rec(kid string, publish time.Duration, opts ...func(*KeyRecord)) KeyRecord {
	r := KeyRecord{KID: kid, CreatedAt: at(publish), PublishAt: at(publish)}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func activate(d time.Duration) func(*KeyRecord) { return func(r *KeyRecord) { r.ActivateAt = tp(d) } }
func retire(d time.Duration) func(*KeyRecord)   { return func(r *KeyRecord) { r.RetireAt = tp(d) } }
func expire(d time.Duration) func(*KeyRecord)   { return func(r *KeyRecord) { r.ExpireAt = tp(d) } }
func revoke(d time.Duration) func(*KeyRecord) {
	return func(r *KeyRecord) { r.RevokedAt, r.RevokeReason = tp(d), "keyCompromise" }
}

// rotation is the standard timeline: "old" active from 0, "new" published at
// rotT-1h and activated at rotT.
func rotation(extra ...func(*KeyRecord)) []KeyRecord {
	return []KeyRecord{
		rec("old", 0, activate(0)),
		rec("new", rotT-hour, append([]func(*KeyRecord){activate(rotT)}, extra...)...),
	}
}

func states(views []View) string {
	var b strings.Builder
	for i, v := range views {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(v.KID + "=" + string(v.State))
	}
	return b.String()
}

func kids(views []View) string {
	var out []string
	for _, v := range views {
		out = append(out, v.KID)
	}
	return strings.Join(out, ",")
}

func TestDerive(t *testing.T) {
	tests := []struct {
		name      string
		recs      []KeyRecord
		now       time.Duration
		states    string
		signing   string
		published string
		retiredAt map[string]time.Duration // kid → want RetiredAt; kids absent want nil
		expiresAt map[string]time.Duration
	}{
		{"rotation: before new key is published", rotation(), rotT - 2*hour,
			"old=active new=scheduled", "old", "old", nil, nil},
		{"rotation: new key pending, both sign", rotation(), rotT - hour,
			"old=active new=pending", "old,new", "old,new", nil, nil},
		{"rotation: switch at T", rotation(), rotT,
			"old=retired new=active", "new", "old,new",
			map[string]time.Duration{"old": rotT}, map[string]time.Duration{"old": rotT + grace}},
		{"rotation: just before old expires", rotation(), rotT + grace - time.Nanosecond,
			"old=retired new=active", "new", "old,new",
			map[string]time.Duration{"old": rotT}, map[string]time.Duration{"old": rotT + grace}},
		{"rotation: old expired at T+grace", rotation(), rotT + grace,
			"old=expired new=active", "new", "new",
			map[string]time.Duration{"old": rotT}, map[string]time.Duration{"old": rotT + grace}},

		{"revoke pending before activation: old stays active", rotation(revoke(rotT - hour/2)), rotT + hour,
			"old=active new=revoked", "old", "old", nil, nil},
		{"revoke active: no key active, old not resurrected", rotation(revoke(rotT + hour)), rotT + 2*hour,
			"old=retired new=revoked", "", "old",
			map[string]time.Duration{"old": rotT}, map[string]time.Duration{"old": rotT + grace}},
		{"revoked at the activation instant still activated", rotation(revoke(rotT)), rotT,
			"old=retired new=revoked", "", "old",
			map[string]time.Duration{"old": rotT}, map[string]time.Duration{"old": rotT + grace}},
		{"revocation scheduled for later is not in effect yet", rotation(revoke(rotT + 5*hour)), rotT + hour,
			"old=retired new=active", "new", "old,new",
			map[string]time.Duration{"old": rotT}, map[string]time.Duration{"old": rotT + grace}},
		{"revoked takes precedence over expired",
			[]KeyRecord{rec("k", 0, activate(0), expire(hour), revoke(2*hour))}, 3 * hour,
			"k=revoked", "", "", nil, map[string]time.Duration{"k": hour}},
		{"revoked while scheduled", []KeyRecord{rec("k", 5*hour, revoke(hour))}, 2 * hour,
			"k=revoked", "", "", nil, nil},

		{"explicit retire of the only key: nothing active",
			[]KeyRecord{rec("k", 0, activate(0), retire(5*hour))}, 6 * hour,
			"k=retired", "", "k",
			map[string]time.Duration{"k": 5 * hour}, map[string]time.Duration{"k": 5*hour + grace}},
		{"explicit retire in the future is not in effect yet",
			[]KeyRecord{rec("k", 0, activate(0), retire(5*hour))}, 4 * hour,
			"k=active", "k", "k", nil, nil},
		{"earlier explicit retire is the effective RetiredAt",
			[]KeyRecord{rec("old", 0, activate(0), retire(95*hour)), rec("new", rotT-hour, activate(rotT))}, rotT,
			"old=retired new=active", "new", "old,new",
			map[string]time.Duration{"old": 95 * hour}, map[string]time.Duration{"old": 95*hour + grace}},
		{"pending key retired before its activation never activates", rotation(retire(rotT - hour/2)), rotT + hour,
			"old=active new=retired", "old", "old,new",
			map[string]time.Duration{"new": rotT - hour/2}, map[string]time.Duration{"new": rotT - hour/2 + grace}},
		{"pending key expired before its activation never activates", rotation(expire(rotT - hour/2)), rotT + hour,
			"old=active new=expired", "old", "old", nil, map[string]time.Duration{"new": rotT - hour/2}},
		{"explicit expire of the active key", []KeyRecord{rec("k", 0, activate(0), expire(3*hour))}, 3 * hour,
			"k=expired", "", "", nil, map[string]time.Duration{"k": 3 * hour}},
		{"explicit expire overrides the grace period",
			[]KeyRecord{rec("old", 0, activate(0), expire(rotT+2*hour)), rec("new", rotT-hour, activate(rotT))}, rotT + 2*hour,
			"old=expired new=active", "new", "new",
			map[string]time.Duration{"old": rotT}, map[string]time.Duration{"old": rotT + 2*hour}},

		{"tie: larger kid wins, smaller retired at once",
			[]KeyRecord{rec("b", 0, activate(hour)), rec("a", 0, activate(hour))}, hour,
			"b=active a=retired", "b", "b,a",
			map[string]time.Duration{"a": hour}, map[string]time.Duration{"a": hour + grace}},
		{"activation never precedes publication",
			[]KeyRecord{rec("old", 0, activate(0)), rec("new", 10*hour, activate(5*hour))}, 7 * hour,
			"old=active new=scheduled", "old", "old", nil, nil},
		{"activation at publication when ActivateAt is earlier",
			[]KeyRecord{rec("old", 0, activate(0)), rec("new", 10*hour, activate(5*hour))}, 10 * hour,
			"old=retired new=active", "new", "old,new",
			map[string]time.Duration{"old": 10 * hour}, map[string]time.Duration{"old": 10*hour + grace}},
		{"pending without ActivateAt publishes but does not sign",
			[]KeyRecord{rec("a", 0, activate(0)), rec("p", hour)}, 2 * hour,
			"a=active p=pending", "a", "a,p", nil, nil},
		{"several pending keys sign in activation order",
			[]KeyRecord{rec("z", 0, activate(3*hour)), rec("y", 0, activate(2*hour)), rec("a", 0, activate(0)), rec("x", 0, activate(2*hour))}, hour,
			"z=pending y=pending a=active x=pending", "a,x,y,z", "z,y,a,x", nil, nil},
		{"pending keys do not sign without an active key",
			[]KeyRecord{rec("p", 0, activate(5*hour))}, hour,
			"p=pending", "", "p", nil, nil},
		{"a revoked successor still supersedes; the key after it is active",
			[]KeyRecord{rec("k1", 0, activate(0)), rec("k2", 0, activate(hour), revoke(2*hour)), rec("k3", 0, activate(3*hour))}, 4 * hour,
			"k1=retired k2=revoked k3=active", "k3", "k1,k3",
			map[string]time.Duration{"k1": hour, "k2": 3 * hour}, map[string]time.Duration{"k1": hour + grace, "k2": 3*hour + grace}},
	}
	for _, tt := range tests {
		views := Derive(at(tt.now), tt.recs, testPolicy)
		if got := states(views); got != tt.states {
			t.Errorf("%s: states %s, want %s", tt.name, got, tt.states)
		}
		if got := kids(Signing(views)); got != tt.signing {
			t.Errorf("%s: Signing %q, want %q", tt.name, got, tt.signing)
		}
		if got := kids(Published(views)); got != tt.published {
			t.Errorf("%s: Published %q, want %q", tt.name, got, tt.published)
		}
		a, ok := Active(views)
		if want := strings.Split(tt.signing, ",")[0]; ok != (want != "") || a.KID != want {
			t.Errorf("%s: Active = %q, %v; want %q", tt.name, a.KID, ok, want)
		}
		for _, v := range views {
			checkTime(t, tt.name+": "+v.KID+" RetiredAt", v.RetiredAt, tt.retiredAt, v.KID)
			checkTime(t, tt.name+": "+v.KID+" ExpiresAt", v.ExpiresAt, tt.expiresAt, v.KID)
			if !reflect.DeepEqual(v.KeyRecord, recByKID(tt.recs, v.KID)) {
				t.Errorf("%s: %s: View.KeyRecord differs from the input", tt.name, v.KID)
			}
		}
	}
}

func checkTime(t *testing.T, what string, got *time.Time, want map[string]time.Duration, kid string) {
	t.Helper()
	w, ok := want[kid]
	switch {
	case !ok && got != nil:
		t.Errorf("%s = %v, want nil", what, *got)
	case ok && got == nil:
		t.Errorf("%s = nil, want %v", what, at(w))
	case ok && !got.Equal(at(w)):
		t.Errorf("%s = %v, want %v", what, *got, at(w))
	}
}

func recByKID(recs []KeyRecord, kid string) KeyRecord {
	for _, r := range recs {
		if r.KID == kid {
			return r
		}
	}
	return KeyRecord{}
}

func TestDerivePolicy(t *testing.T) {
	recs := rotation()
	for _, tt := range []struct {
		grace   time.Duration
		expires time.Duration
		state   State
	}{
		{-hour, rotT, StateExpired}, // negative grace counts as zero: unpublished at the switch
		{0, rotT, StateExpired},
		{hour, rotT + hour, StateRetired},
	} {
		v := Derive(at(rotT), recs, Policy{RetireGrace: tt.grace})[0]
		if v.State != tt.state || v.ExpiresAt == nil || !v.ExpiresAt.Equal(at(tt.expires)) {
			t.Errorf("grace %v: old = %s, expires %v; want %s, %v", tt.grace, v.State, v.ExpiresAt, tt.state, at(tt.expires))
		}
	}
}

func TestNextTransition(t *testing.T) {
	tests := []struct {
		name string
		recs []KeyRecord
		now  time.Duration
		want time.Duration
		ok   bool
	}{
		{"rotation: next is publication", rotation(), 0, rotT - hour, true},
		{"rotation: next is activation", rotation(), rotT - hour, rotT, true},
		{"rotation: next is expiry of old", rotation(), rotT, rotT + grace, true},
		{"rotation: nothing left", rotation(), rotT + grace, 0, false},
		{"scheduled revocation", rotation(revoke(rotT + 5*hour)), rotT, rotT + 5*hour, true},
		{"revoked pending: its activation time changes nothing", rotation(revoke(rotT - hour/2)), rotT - hour/2, 0, false},
		{"explicit retire, then its grace", []KeyRecord{rec("k", 0, activate(0), retire(5*hour))}, hour, 5 * hour, true},
		{"after explicit retire: expiry", []KeyRecord{rec("k", 0, activate(0), retire(5*hour))}, 5 * hour, 5*hour + grace, true},
		{"explicit expire", []KeyRecord{rec("k", 0, activate(0), expire(3*hour))}, hour, 3 * hour, true},
		{"no records", nil, 0, 0, false},
	}
	for _, tt := range tests {
		got, ok := NextTransition(at(tt.now), tt.recs, testPolicy)
		if ok != tt.ok || (ok && !got.Equal(at(tt.want))) {
			t.Errorf("%s: NextTransition = %v, %v; want %v, %v", tt.name, got, ok, at(tt.want), tt.ok)
		}
	}
}

// permutations returns recs in several orders: reversed and every rotation.
func permutations(recs []KeyRecord) [][]KeyRecord {
	var out [][]KeyRecord
	for i := range recs {
		out = append(out, append(slices.Clone(recs[i:]), recs[:i]...))
	}
	rev := slices.Clone(recs)
	slices.Reverse(rev)
	return append(out, rev)
}

func byKID(views []View) map[string]View {
	m := make(map[string]View, len(views))
	for _, v := range views {
		m[v.KID] = v
	}
	return m
}

func TestDeriveDeterministic(t *testing.T) {
	recs := []KeyRecord{
		rec("k1", 0, activate(0)),
		rec("k2", 0, activate(hour), revoke(2*hour)),
		rec("k3", 0, activate(3*hour)),
		rec("k4", 3*hour, activate(3*hour)), // ties with k3
		rec("k5", 4*hour, activate(6*hour)),
		rec("k6", 4*hour),
	}
	for _, now := range []time.Duration{0, hour, 3 * hour, 5 * hour, 3*hour + grace} {
		want := Derive(at(now), recs, testPolicy)
		if again := Derive(at(now), recs, testPolicy); !reflect.DeepEqual(again, want) {
			t.Errorf("now %v: two calls disagree", now)
		}
		wantNext, wantOK := NextTransition(at(now), recs, testPolicy)
		for _, perm := range permutations(recs) {
			got := Derive(at(now), perm, testPolicy)
			for i := range perm {
				if got[i].KID != perm[i].KID {
					t.Fatalf("now %v: output order differs from input order", now)
				}
			}
			if !reflect.DeepEqual(byKID(got), byKID(want)) {
				t.Errorf("now %v: order %s gives %s, want %s", now, kids(got), states(got), states(want))
			}
			if a, b := kids(Signing(got)), kids(Signing(want)); a != b {
				t.Errorf("now %v: Signing depends on order: %s vs %s", now, a, b)
			}
			if next, ok := NextTransition(at(now), perm, testPolicy); ok != wantOK || !next.Equal(wantNext) {
				t.Errorf("now %v: NextTransition depends on order", now)
			}
		}
	}
}

// TestLifecycleInvariants walks random key histories minute by minute and
// checks what must hold at every instant: at most one active key, revoked
// and expired are terminal, a retired key never signs again, and
// NextTransition names exactly the first minute at which a state changes.
func TestLifecycleInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const span = 240 // minutes
	m := func() time.Duration { return time.Duration(rng.IntN(span)) * time.Minute }
	maybe := func() *time.Time {
		if rng.IntN(3) == 0 {
			return tp(m())
		}
		return nil
	}
	p := Policy{RetireGrace: 30 * time.Minute}
	for trial := 0; trial < 200; trial++ {
		var recs []KeyRecord
		for i := 0; i < 1+rng.IntN(5); i++ {
			r := rec(string(rune('a'+i)), m())
			if rng.IntN(4) != 0 {
				r.ActivateAt = tp(m())
			}
			r.RetireAt, r.ExpireAt, r.RevokedAt = maybe(), maybe(), maybe()
			recs = append(recs, r)
		}
		const last = span + 60
		timeline := make([]string, last+1) // states at each minute
		for minute := range timeline {
			timeline[minute] = states(Derive(at(time.Duration(minute)*time.Minute), recs, p))
		}
		prev := Derive(at(-time.Minute), recs, p)
		for minute := 0; minute <= last; minute++ {
			now := at(time.Duration(minute) * time.Minute)
			views := Derive(now, recs, p)
			active := 0
			for i, v := range views {
				if v.State == StateActive {
					active++
				}
				was := prev[i].State
				if (was == StateRevoked && v.State != StateRevoked) ||
					(was == StateExpired && v.State != StateExpired && v.State != StateRevoked) ||
					(was == StateRetired && v.State == StateActive) {
					t.Fatalf("trial %d minute %d: %s went %s → %s; records %+v", trial, minute, v.KID, was, v.State, recs)
				}
			}
			if active > 1 {
				t.Fatalf("trial %d minute %d: %d active keys: %s", trial, minute, active, states(views))
			}
			// The first later minute whose states differ is the next transition.
			next, ok := NextTransition(now, recs, p)
			var want time.Time
			for later := minute + 1; later <= last; later++ {
				if timeline[later] != timeline[minute] {
					want = at(time.Duration(later) * time.Minute)
					break
				}
			}
			if ok != !want.IsZero() || !next.Equal(want) {
				t.Fatalf("trial %d minute %d: NextTransition = %v, %v; want %v (records %+v)", trial, minute, next, ok, want, recs)
			}
			prev = views
		}
	}
}
