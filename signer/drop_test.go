package signer

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// TestDropSignatures: the signatures by the kids dropped go, the others stay
// and still verify; a card that drops nothing comes back as it was.
func TestDropSignatures(t *testing.T) {
	k1, k2 := newKey(t, jose.ES256), newKey(t, jose.EdDSA)
	signed, err := Sign(t.Context(), testsupport.Card(t, "interfaces.json"), Options{Keys: []Key{k1.Key, k2.Key}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		drop []string
		want []string // kids left, in order
	}{
		{"nothing", nil, []string{k1.KID, k2.KID}},
		{"an unknown kid", []string{"nope"}, []string{k1.KID, k2.KID}},
		{"one", []string{k2.KID}, []string{k1.KID}},
		{"the other", []string{k1.KID}, []string{k2.KID}},
		{"both", []string{k1.KID, k2.KID}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := DropSignatures(signed.Card, strictjson.Limits{}, func(kid string) bool { return slices.Contains(tc.drop, kid) })
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.want) == 2 && !bytes.Equal(out, signed.Card) {
				t.Fatal("a card that drops nothing was rendered again")
			}
			v := mustVerify(t, out, VerifyOptions{Trusted: keySet(k1, k2)})
			var kids []string
			for _, c := range v.Checks {
				kids = append(kids, c.KID)
				if !c.Valid {
					t.Errorf("signature by %s no longer verifies: %s", c.KID, c.Reason)
				}
			}
			if !slices.Equal(kids, tc.want) {
				t.Fatalf("kids left %v, want %v", kids, tc.want)
			}
		})
	}
	if _, err := DropSignatures([]byte(`{"name":`), strictjson.Limits{}, func(string) bool { return true }); err == nil || !strings.Contains(err.Error(), "drop signatures") {
		t.Fatalf("a broken card: err = %v", err)
	}
}

// bigCard is interfaces.json with one more skill per size, of that many
// tags.
func bigCard(t *testing.T, sizes ...int) []byte {
	t.Helper()
	v, err := card.Parse(testsupport.Card(t, "interfaces.json"), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var list []strictjson.Value
	for i, n := range sizes {
		tags := make([]strictjson.Value, n)
		for j := range tags {
			tags[j] = strictjson.StringValue("t" + strconv.Itoa(j))
		}
		id := "bulk" + strconv.Itoa(i)
		list = append(list, strictjson.ObjectValue(
			strictjson.Member{Key: "id", Val: strictjson.StringValue(id)}, strictjson.Member{Key: "name", Val: strictjson.StringValue(id)},
			strictjson.Member{Key: "description", Val: strictjson.StringValue("d")}, strictjson.Member{Key: "tags", Val: strictjson.ArrayValue(tags...)}))
	}
	for i, m := range v.Obj {
		if m.Key == "skills" {
			v.Obj[i].Val = strictjson.ArrayValue(append(m.Val.Arr, list...)...)
		}
	}
	return v.Compact()
}

// countValues counts the JSON values of v, as strictjson.Limits.MaxValues does.
func countValues(v strictjson.Value) int {
	n := 1
	for _, x := range v.Arr {
		n += countValues(x)
	}
	for _, m := range v.Obj {
		n += countValues(m.Val)
	}
	return n
}

// TestDropSignaturesLimits (review #11): a card read under raised value
// limits, or one at the default cap that its signatures took past it, still
// has its signatures dropped (the caller passes the limits it was read
// under), where the default caps alone refused both.
func TestDropSignaturesLimits(t *testing.T) {
	k1, k2 := newKey(t, jose.ES256), newKey(t, jose.EdDSA)
	keys := []Key{k1.Key, k2.Key}
	over := bigCard(t, 4000, 4000, 4000, 4000, 4000, 4000, 4000) // over the default 20,000 values
	// A card of exactly the default cap.
	probe, err := card.Parse(bigCard(t, 4000, 4000, 4000, 4000, 1000), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	atCap := bigCard(t, 4000, 4000, 4000, 4000, 1000+card.DefaultMaxValues-countValues(probe))
	for _, tc := range []struct {
		name string
		data []byte
		lim  strictjson.Limits
	}{
		{"raised max values", over, strictjson.Limits{MaxBytes: 1 << 20, MaxValues: 40000}},
		{"signatures past the default cap", atCap, strictjson.Limits{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			signed, err := Sign(t.Context(), tc.data, Options{Keys: keys, Card: card.Options{Limits: tc.lim}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := card.Parse(signed.Card, strictjson.Limits{MaxBytes: len(signed.Card)}); err == nil {
				t.Fatal("the signed card is within the default value cap: the test shows nothing")
			}
			out, err := DropSignatures(signed.Card, tc.lim, func(kid string) bool { return kid == k2.KID })
			if err != nil {
				t.Fatal(err)
			}
			v := mustVerify(t, out, VerifyOptions{Trusted: keySet(k1, k2), Limits: strictjson.Limits{MaxBytes: 1 << 21, MaxValues: 100000}})
			if len(v.Checks) != 1 || v.Checks[0].KID != k1.KID || !v.Valid(true) {
				t.Fatalf("after dropping %s: %+v", k2.KID, v.Checks)
			}
		})
	}
}
