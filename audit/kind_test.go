package audit

import (
	"strings"
	"testing"
	"time"
)

// TestAdminRecords: an administrative record hashes its kind, reason and
// detail (changing any breaks the chain), each kind's fields are checked,
// and the records of the kinds that existed before hash exactly as before.
func TestAdminRecords(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 1, 2, 3, 4, time.UTC)
	revoked := t0.Add(time.Hour)
	state := EncodeKeyState(KeyState{CreatedAt: t0, PublishAt: t0, ActivateAt: &t0, RevokedAt: &revoked, RevokeReason: "compromise"})
	key := Record{Seq: 1, Time: t0, Caller: "token:alice", Outcome: string(KindKeyRevoke), Reason: "compromise",
		KID: "k1", Alg: "ES256", CanonicalSHA256: make([]byte, 32), Detail: state}
	agent := Record{Seq: 1, Time: t0, Caller: "token:bob", Outcome: string(KindAgentRemove), CanonicalSHA256: make([]byte, 32),
		Detail: EncodeAgentDetail(AgentDetail{Agent: "payments"})}
	for _, r := range []Record{key, agent} {
		if err := r.CheckOutcome(); err != nil {
			t.Fatalf("%s: %v", r.Kind(), err)
		}
		r.Hash = r.ComputeHash(Genesis())
		r.PrevHash = Genesis()
		if err := VerifyChain(Genesis(), []Record{r}); err != nil {
			t.Fatal(err)
		}
		for name, edit := range map[string]func(*Record){
			"kind":   func(r *Record) { r.Outcome = string(KindKeyActivate) },
			"reason": func(r *Record) { r.Reason = "routine" },
			"detail": func(r *Record) { r.Detail += " " },
			"caller": func(r *Record) { r.Caller = "token:mallory" },
		} {
			e := r
			edit(&e)
			if e.ComputeHash(Genesis()) == nil || string(e.ComputeHash(Genesis())) == string(r.Hash) {
				t.Errorf("%s record: editing its %s leaves its hash", r.Kind(), name)
			}
		}
	}

	// A signed record's hash is the 12-field encoding: a Detail may not
	// sneak in.
	signed := Record{Seq: 1, Time: t0, CanonicalSHA256: make([]byte, 32), KID: "k1", Alg: "ES256", Profile: "spec", Signature: "s"}
	withDetail := signed
	withDetail.Detail = state
	if withDetail.CheckOutcome() == nil {
		t.Error("a signed record with a detail passed CheckOutcome")
	}

	bad := []struct {
		name string
		r    Record
		want string
	}{
		{"key record without detail", func() Record { r := key; r.Detail = ""; return r }(), "detail"},
		{"key record without kid", func() Record { r := key; r.KID = ""; return r }(), "names no kid"},
		{"key record with a signature", func() Record { r := key; r.Signature = "s"; return r }(), "profile or signature"},
		{"key detail not canonical", func() Record { r := key; r.Detail = " " + r.Detail; return r }(), "encoding"},
		{"agent record with a key's detail", func() Record { r := agent; r.Detail = state; return r }(), "agent detail"},
		{"agent record with a kid", func() Record { r := agent; r.KID = "k1"; return r }(), "kid or alg"},
		{"unknown kind", func() Record { r := key; r.Outcome = "key.destroy"; return r }(), "unknown outcome"},
	}
	for _, tt := range bad {
		if err := tt.r.CheckOutcome(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: CheckOutcome = %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
	for _, k := range Kinds() {
		if k.IsAdmin() == (k == KindSigned || k == KindRefused) {
			t.Errorf("kind %s: IsAdmin %v", k, k.IsAdmin())
		}
	}
}
