package witness

import (
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/witnesstest"
	"github.com/cardsign/cardsign/transparency"
)

// NewCollector refuses a configuration it could not work with, saying
// which witness and why.
func TestNewCollectorRefuses(t *testing.T) {
	l := newLog(t, logKey(t), "")
	k1, k2 := witnesstest.NewKey(t, "witness.example/w1"), witnesstest.NewKey(t, "witness.example/w2")
	p, err := transparency.NewWitnessPolicy([]string{k1.VKey, k2.VKey}, 2)
	if err != nil {
		t.Fatal(err)
	}
	ep1, ep2 := endpoint(t, k1.VKey, "http://127.0.0.1:1"), endpoint(t, k2.VKey, "http://127.0.0.1:2/")
	stranger := endpoint(t, witnesstest.NewKey(t, "witness.example/w3").VKey, "http://127.0.0.1:3")
	misnamed := ep2
	misnamed.Name = "witness.example/w9"
	badURL := ep2
	badURL.URL = "ftp://witness.example"
	for _, tc := range []struct {
		name string
		eps  []Endpoint
		q    int
		want string
	}{
		{"no witness", nil, 1, "at least one witness"},
		{"quorum 0", []Endpoint{ep1, ep2}, 0, "quorum 0 is outside 1..2"},
		{"quorum beyond", []Endpoint{ep1}, 2, "quorum 2 is outside 1..1"},
		{"twice", []Endpoint{ep1, ep1}, 1, `witness 2: "witness.example/w1" is listed twice`},
		{"not in the policy", []Endpoint{ep1, stranger}, 1, `witness 2: "witness.example/w3" (key`},
		{"a name that is not the key's", []Endpoint{ep1, misnamed}, 1, `witness 2: the name "witness.example/w9" is not the name of its key`},
		{"not http", []Endpoint{ep1, badURL}, 1, `url "ftp://witness.example": want an http:// or https:// URL prefix`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := p
			p.Quorum = tc.q
			_, err := NewCollector(l, newCosigStore(t), tc.eps, p, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one with %q", err, tc.want)
			}
		})
	}
	c, err := NewCollector(l, newCosigStore(t), []Endpoint{ep1, ep2}, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ws[1].url; got != "http://127.0.0.1:2/add-checkpoint" {
		t.Fatalf("add-checkpoint URL %q", got)
	}
}
