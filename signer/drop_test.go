package signer

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/jose"
)

// TestDropSignatures: the signatures by the kids dropped go, the others stay
// and still verify; a card that drops nothing comes back as it was.
func TestDropSignatures(t *testing.T) {
	k1, k2 := newKey(t, jose.ES256), newKey(t, jose.EdDSA)
	signed, err := Sign(context.Background(), readCard(t, "interfaces.json"), Options{Keys: []Key{k1.Key, k2.Key}})
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
			out, err := DropSignatures(signed.Card, func(kid string) bool { return slices.Contains(tc.drop, kid) })
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.want) == 2 && !bytes.Equal(out, signed.Card) {
				t.Fatal("a card that drops nothing was rendered again")
			}
			v, err := Verify(context.Background(), out, VerifyOptions{Trusted: keySet(k1, k2)})
			if err != nil {
				t.Fatal(err)
			}
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
	if _, err := DropSignatures([]byte(`{"name":`), func(string) bool { return true }); err == nil || !strings.Contains(err.Error(), "drop signatures") {
		t.Fatalf("a broken card: err = %v", err)
	}
}
