package signer

import (
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/witnesstest"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
)

// cosignProofs returns the signed card with each proof's checkpoint
// cosigned by ws (ReplaceProofs: nothing signed changes).
func cosignProofs(t *testing.T, card []byte, ws ...witnesstest.Key) []byte {
	t.Helper()
	proofs, err := Proofs(card, strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range proofs {
		p, err := transparency.ParseProof(s)
		if err != nil {
			t.Fatal(err)
		}
		text, _, _ := strings.Cut(string(p.Checkpoint), "\n\n")
		for _, w := range ws {
			cs, err := transparency.ParseCosignatures(1, w.Name, w.Cosign(t, text+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			if p.Checkpoint, err = transparency.AddCosignatures(p.Checkpoint, cs); err != nil {
				t.Fatal(err)
			}
		}
		proofs[i] = p.Marshal()
	}
	out, err := ReplaceProofs(card, strictjson.Limits{}, proofs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestVerifyWitnessedProofs(t *testing.T) {
	res, k, keys := loggedCard(t, "divergent.json")
	w1, w2, w3 := witnesstest.NewKey(t, "w1.example"), witnesstest.NewKey(t, "w2.example"), witnesstest.NewKey(t, "w3.example")
	stranger := witnesstest.NewKey(t, "w2.example") // w2's name, another key
	p, err := transparency.NewWitnessPolicy([]string{w1.VKey, w2.VKey, w3.VKey}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		card    []byte
		valid   bool
		vouched string
	}{
		{"two of three", cosignProofs(t, res.Card, w1, w3), true, "w1.example,w3.example"},
		{"three", cosignProofs(t, res.Card, w3, w2, w1), true, "w1.example,w2.example,w3.example"},
		{"one", cosignProofs(t, res.Card, w2), false, ""},
		{"one and a stranger under a witness's name", cosignProofs(t, res.Card, w1, stranger), false, ""},
		{"none", res.Card, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := mustVerify(t, tc.card, VerifyOptions{Trusted: keySet(k), LogKeys: keys, Witnesses: p})
			if v.Valid(true) != tc.valid {
				t.Fatalf("valid %v, want %v: %+v", v.Valid(true), tc.valid, v.Checks)
			}
			for _, c := range v.Checks {
				if !tc.valid {
					if !strings.Contains(c.Reason, "not witnessed") {
						t.Errorf("reason %q does not say the checkpoint is not witnessed", c.Reason)
					}
					continue
				}
				var got []string
				for _, vo := range c.Logged.Witnessed {
					got = append(got, vo.Witness)
				}
				if strings.Join(got, ",") != tc.vouched {
					t.Errorf("vouched %v, want %s", got, tc.vouched)
				}
			}
			// Without a witness policy every proof counts, cosigned or not.
			if v := mustVerify(t, tc.card, VerifyOptions{Trusted: keySet(k), LogKeys: keys}); !v.Valid(true) {
				t.Errorf("without witnesses: %+v", v.Checks)
			}
		})
	}
	if _, err := Verify(t.Context(), res.Card, VerifyOptions{Trusted: keySet(k), Witnesses: p}); err == nil {
		t.Error("witnesses without log keys accepted")
	}
}

func TestReplaceProofsChangesOnlyProofs(t *testing.T) {
	res, _, _ := loggedCard(t, "divergent.json")
	cosigned := cosignProofs(t, res.Card, witnesstest.NewKey(t, "w1.example"))
	if string(cosigned) == string(res.Card) {
		t.Fatal("the proofs did not change")
	}
	old, err := Proofs(res.Card, strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReplaceProofs(cosigned, strictjson.Limits{}, old)
	if err != nil || string(back) != string(res.Card) {
		t.Fatalf("putting the old proofs back: %v\n%s\nwant\n%s", err, back, res.Card)
	}
	if _, err := ReplaceProofs(res.Card, strictjson.Limits{}, old[:1]); err == nil {
		t.Error("a proof count unlike the signatures' accepted")
	}
}
