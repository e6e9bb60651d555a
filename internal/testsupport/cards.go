package testsupport

import (
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/strictjson"
)

// WithSignatures returns the card src carrying the signatures of the
// signed card signed: another JSON form of a card under its signatures,
// for tests of a reading other than the one signed.
func WithSignatures(t testing.TB, src, signed []byte) []byte {
	t.Helper()
	s, err := card.Parse(signed, strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sigs, _ := s.Get("signatures")
	raw, err := card.Parse(src, strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return strictjson.ObjectValue(append(raw.Obj, strictjson.Member{Key: "signatures", Val: sigs})...).Compact()
}
