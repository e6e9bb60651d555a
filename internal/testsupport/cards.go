package testsupport

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testbin"
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

// Card reads the sample card testdata/cards/name of the repository.
func Card(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testbin.RepoRoot(), "testdata", "cards", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
