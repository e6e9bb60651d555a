package audit

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

const refusedReason = "host policy: caller spiffe://example/signer may not sign for host evil.example (url https://evil.example/a2a)"

// refusedRecord is sampleRecord as a request the signing policy refused.
func refusedRecord() Record {
	r := sampleRecord()
	r.KID, r.Alg, r.Profile, r.Signature = "", "", "", ""
	r.Outcome, r.Reason = OutcomeRefused, refusedReason
	return r
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
		r := &recs[i]
		r.KID, r.Alg, r.Profile, r.Signature = "", "", "", ""
		r.Outcome, r.Reason = OutcomeRefused, refusedReason
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
		{name: "valid mixed chain", mod: func([]Record) {}},
		{name: "outcome signed dropped", mod: func(r []Record) { r[1].Outcome = "" }}, // same hash: "" means signed
		{
			name: "refused flipped to signed",
			mod:  func(r []Record) { r[2].Outcome = OutcomeSigned },
			// Its Reason would now be unhashed.
			wantSeq: 3, reason: "invalid record: a signed record has a reason",
		},
		{
			name:    "refused flipped to signed, reason removed",
			mod:     func(r []Record) { r[2].Outcome, r[2].Reason = OutcomeSigned, "" },
			wantSeq: 3, reason: "hash mismatch",
		},
		{
			name:    "refused flipped to unmarked, reason removed",
			mod:     func(r []Record) { r[5].Outcome, r[5].Reason = "", "" },
			wantSeq: 6, reason: "hash mismatch",
		},
		{
			name:    "signed flipped to refused",
			mod:     func(r []Record) { r[3].Outcome = OutcomeRefused },
			wantSeq: 4, reason: "invalid record: a refused record has",
		},
		{
			name: "signed flipped to refused, signature removed",
			mod: func(r []Record) {
				r[3].Outcome, r[3].Reason = OutcomeRefused, "x"
				r[3].KID, r[3].Alg, r[3].Profile, r[3].Signature = "", "", "", ""
			},
			wantSeq: 4, reason: "hash mismatch",
		},
		{
			name:    "reason edited",
			mod:     func(r []Record) { r[5].Reason = "policy: fine" },
			wantSeq: 6, reason: "hash mismatch",
		},
		{
			name:    "reason emptied",
			mod:     func(r []Record) { r[2].Reason = "" },
			wantSeq: 3, reason: "hash mismatch",
		},
		{
			name:    "reason added to a signed record",
			mod:     func(r []Record) { r[0].Reason = "looks refused" },
			wantSeq: 1, reason: "invalid record: a signed record has a reason",
		},
		{
			name:    "unknown outcome",
			mod:     func(r []Record) { r[2].Outcome = "denied" },
			wantSeq: 3, reason: `invalid record: unknown outcome "denied"`,
		},
		{
			name: "unknown outcome, hash recomputed",
			mod: func(r []Record) {
				r[2].Outcome = "denied"
				r[2].Hash = r[2].ComputeHash(r[2].PrevHash)
			},
			wantSeq: 3, reason: "invalid record: unknown outcome",
		},
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
