package audit

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

const refusedReason = "host policy: caller spiffe://example/signer may not sign for host evil.example (url https://evil.example/a2a)"

// refusedRecord is sampleRecord as a request the signing policy refused.
func refusedRecord() Record {
	r := sampleRecord()
	refuse(&r)
	return r
}

// refuse makes r the record of a refused request: no key, no signature,
// the policy's reason.
func refuse(r *Record) {
	r.KID, r.Alg, r.Profile, r.Signature = "", "", "", ""
	r.Outcome, r.Reason = OutcomeRefused, refusedReason
}

// TestComputeHashGolden pins hashes computed outside Go (Python hashlib,
// following the ComputeHash doc comment byte by byte). The signed value is
// the hash every record had before outcomes existed: it must never change.
func TestComputeHashGolden(t *testing.T) {
	prev := bytes.Repeat([]byte{0xab}, 32)
	signedOutcome := sampleRecord()
	signedOutcome.Outcome = OutcomeSigned
	tests := []struct {
		name string
		r    Record
		want string
	}{
		{"signed, no outcome", sampleRecord(), "7bf4c6a71345af5eb3dc95f5e3bf8974ed0cc6551a5568f3196ab823b5aa0efe"},
		{"signed, outcome signed", signedOutcome, "7bf4c6a71345af5eb3dc95f5e3bf8974ed0cc6551a5568f3196ab823b5aa0efe"},
		{"refused", refusedRecord(), "12184cfbce2b0ffe41fca5d12ec3ba8e7d79a2c9efbdcdf266c450bd410d7e25"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hex.EncodeToString(tt.r.ComputeHash(prev)); got != tt.want {
				t.Fatalf("ComputeHash = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestComputeHashEncodingRefused reimplements the documented encoding of a
// refused record independently, as an external auditor would.
func TestComputeHashEncodingRefused(t *testing.T) {
	r := refusedRecord()
	prev := bytes.Repeat([]byte{0xab}, 32)
	fields := auditorHead(r)
	for range 4 { // KID, Alg, Profile, Signature: empty
		fields = append(fields, nil)
	}
	fields = append(fields, []byte("refused"), []byte(refusedReason))
	want := auditorHash(prev, fields...)
	if got := r.ComputeHash(prev); !bytes.Equal(got, want) {
		t.Fatalf("ComputeHash = %x, want %x", got, want)
	}
}

func TestComputeHashOutcome(t *testing.T) {
	prev := Genesis()
	refused := refusedRecord()
	h := refused.ComputeHash(prev)

	// The same record marked signed (or unmarked): 12 fields, another hash.
	for _, o := range []string{"", OutcomeSigned} {
		r := refused
		r.Outcome = o
		if bytes.Equal(r.ComputeHash(prev), h) {
			t.Errorf("outcome %q hashes like refused", o)
		}
		r.Reason = ""
		if bytes.Equal(r.ComputeHash(prev), h) {
			t.Errorf("outcome %q without reason hashes like refused", o)
		}
	}
	// Reason is covered for a refused record, and moving bytes between
	// Outcome-adjacent fields changes the hash.
	for name, mod := range map[string]func(r *Record){
		"reason":          func(r *Record) { r.Reason += "x" },
		"empty reason":    func(r *Record) { r.Reason = "" },
		"signature field": func(r *Record) { r.Signature = "x" },
		"card name":       func(r *Record) { r.CardName += "x" },
	} {
		r := refusedRecord()
		mod(&r)
		if bytes.Equal(r.ComputeHash(prev), h) {
			t.Errorf("changing %s did not change a refused record's hash", name)
		}
	}
	// A signed record's hash ignores Outcome "signed" vs "" (old records).
	signed := sampleRecord()
	marked := signed
	marked.Outcome = OutcomeSigned
	if !bytes.Equal(signed.ComputeHash(prev), marked.ComputeHash(prev)) {
		t.Error(`outcome "signed" hashes differently from ""`)
	}
}

func TestCheckOutcome(t *testing.T) {
	tests := []struct {
		name string
		mod  func(r *Record)
		bad  string // "": valid
	}{
		{"signed, no outcome", func(r *Record) {}, ""},
		{"signed", func(r *Record) { r.Outcome = OutcomeSigned }, ""},
		{"refused", func(r *Record) { *r = refusedRecord() }, ""},
		{"refused, no reason", func(r *Record) { *r = refusedRecord(); r.Reason = "" }, ""},
		{"unknown outcome", func(r *Record) { r.Outcome = "denied" }, "unknown outcome"},
		{"outcome case", func(r *Record) { *r = refusedRecord(); r.Outcome = "Refused" }, "unknown outcome"},
		{"signed with reason", func(r *Record) { r.Reason = "x" }, "signed record has a reason"},
		{"unmarked with reason", func(r *Record) { r.Outcome = OutcomeSigned; r.Reason = "x" }, "signed record has a reason"},
		{"refused with kid", func(r *Record) { *r = refusedRecord(); r.KID = "k1" }, "refused record has"},
		{"refused with alg", func(r *Record) { *r = refusedRecord(); r.Alg = "ES256" }, "refused record has"},
		{"refused with profile", func(r *Record) { *r = refusedRecord(); r.Profile = "spec" }, "refused record has"},
		{"refused with signature", func(r *Record) { *r = refusedRecord(); r.Signature = "c2ln" }, "refused record has"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleRecord()
			tt.mod(&r)
			err := r.CheckOutcome()
			if tt.bad == "" {
				if err != nil {
					t.Fatalf("CheckOutcome = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.bad) {
				t.Fatalf("CheckOutcome = %v, want %q", err, tt.bad)
			}
		})
	}
	if !refusedRecord().Refused() || sampleRecord().Refused() {
		t.Error("Refused() wrong")
	}
}

// mixedChain is chain(8) with records 3 and 6 refused, hashes recomputed.
func mixedChain() []Record {
	recs := chain(8)
	for _, i := range []int{2, 5} {
		refuse(&recs[i])
	}
	recs[1].Outcome = OutcomeSigned // explicit and implicit signed records mix
	prev := Genesis()
	for i := range recs {
		recs[i].PrevHash = prev
		recs[i].Hash = recs[i].ComputeHash(prev)
		prev = recs[i].Hash
	}
	return recs
}

func TestVerifyChainOutcome(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(r []Record)
		wantSeq int64  // 0: chain must verify
		reason  string // prefix of ChainError.Reason
	}{
		{"valid mixed chain", func([]Record) {}, 0, ""},
		{"outcome signed dropped", func(r []Record) { r[1].Outcome = "" }, 0, ""}, // same hash: "" means signed
		// Its Reason would now be unhashed.
		{"refused flipped to signed", func(r []Record) { r[2].Outcome = OutcomeSigned }, 3, "invalid record: a signed record has a reason"},
		{"refused flipped to signed, reason removed", func(r []Record) { r[2].Outcome, r[2].Reason = OutcomeSigned, "" }, 3, "hash mismatch"},
		{"refused flipped to unmarked, reason removed", func(r []Record) { r[5].Outcome, r[5].Reason = "", "" }, 6, "hash mismatch"},
		{"signed flipped to refused", func(r []Record) { r[3].Outcome = OutcomeRefused }, 4, "invalid record: a refused record has"},
		{"signed flipped to refused, signature removed", func(r []Record) {
			r[3].Outcome, r[3].Reason = OutcomeRefused, "x"
			r[3].KID, r[3].Alg, r[3].Profile, r[3].Signature = "", "", "", ""
		}, 4, "hash mismatch"},
		{"reason edited", func(r []Record) { r[5].Reason = "policy: fine" }, 6, "hash mismatch"},
		{"reason emptied", func(r []Record) { r[2].Reason = "" }, 3, "hash mismatch"},
		{"reason added to a signed record", func(r []Record) { r[0].Reason = "looks refused" }, 1, "invalid record: a signed record has a reason"},
		{"unknown outcome", func(r []Record) { r[2].Outcome = "denied" }, 3, `invalid record: unknown outcome "denied"`},
		{"unknown outcome, hash recomputed", func(r []Record) {
			r[2].Outcome = "denied"
			r[2].Hash = r[2].ComputeHash(r[2].PrevHash)
		}, 3, "invalid record: unknown outcome"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := mixedChain()
			tt.mod(recs)
			err := VerifyChain(Genesis(), recs)
			checkChainError(t, err, tt.wantSeq, tt.reason)
		})
	}
}

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
