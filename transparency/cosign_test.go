package transparency

import (
	"errors"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/witnesstest"
)

// testWitness is a witness made in process (witnesstest.NewKey).
type testWitness struct {
	witnesstest.Key
	vkey string
}

func newTestWitness(t *testing.T, name string) testWitness {
	t.Helper()
	k := witnesstest.NewKey(t, name)
	return testWitness{Key: k, vkey: k.VKey}
}

// cosign returns w's cosignature of the signed checkpoint msg of size leaves.
func (w testWitness) cosign(t *testing.T, msg []byte, size int64) Cosignature {
	t.Helper()
	text, _, ok := splitNote(msg)
	if !ok {
		t.Fatalf("not a signed note: %q", msg)
	}
	cs, err := ParseCosignatures(size, w.Name, w.Cosign(t, string(text)))
	if err != nil || len(cs) != 1 {
		t.Fatalf("parse cosignature: %v", err)
	}
	return cs[0]
}

func TestWitnessPolicy(t *testing.T) {
	s, vkeys := testSigner(t, "example.com/log")
	w1, w2, w3 := newTestWitness(t, "w1.example"), newTestWitness(t, "w2.example"), newTestWitness(t, "w3.example")
	var root Hash
	root[0] = 7
	cp, err := s.Sign(5, root)
	if err != nil {
		t.Fatal(err)
	}
	c1, c2, c3 := w1.cosign(t, cp, 5), w2.cosign(t, cp, 5), w3.cosign(t, cp, 5)
	forged := c3
	forged.Signature = c2.Signature[:len(c2.Signature)-4] + "AAA="
	forged.Witness = "w3.example"
	p, err := NewWitnessPolicy([]string{w1.vkey, w2.vkey, w3.vkey}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		add     []Cosignature
		vouched []string
		ok      bool
	}{
		{"none", nil, nil, false},
		{"one", []Cosignature{c1}, []string{"w1.example"}, false},
		{"two", []Cosignature{c3, c1}, []string{"w1.example", "w3.example"}, true},
		{"three", []Cosignature{c1, c2, c3}, []string{"w1.example", "w2.example", "w3.example"}, true},
		{"twice the same", []Cosignature{c1, c1}, []string{"w1.example"}, false},
		{"one forged", []Cosignature{c1, forged}, []string{"w1.example"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := AddCosignatures(cp, tc.add)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := OpenCheckpoint(msg, vkeys); err != nil {
				t.Fatalf("the log's own signature no longer verifies with cosignatures: %v", err)
			}
			vs, err := p.Check(msg)
			var got []string
			for _, v := range vs {
				got = append(got, v.Witness)
				if v.Time.IsZero() {
					t.Errorf("vouch of %s has no time", v.Witness)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.vouched, ",") {
				t.Errorf("vouched %v, want %v", got, tc.vouched)
			}
			var qe *QuorumError
			if tc.ok != (err == nil) || (err != nil && (!errors.As(err, &qe) || !errors.Is(err, ErrWitnessQuorum))) {
				t.Errorf("check: %v, want ok=%v", err, tc.ok)
			}
			stripped, err := StripCosignatures(msg)
			if err != nil || string(stripped) != string(cp) {
				t.Errorf("stripped %q (%v), want the log's checkpoint %q", stripped, err, cp)
			}
		})
	}
	// A cosignature of another checkpoint does not vouch for this one.
	cp6, _ := s.Sign(6, root)
	other := w1.cosign(t, cp6, 6)
	msg, _ := AddCosignatures(cp, []Cosignature{other, c2})
	if vs := p.Vouches(msg); len(vs) != 1 || vs[0].Witness != "w2.example" {
		t.Errorf("a cosignature of checkpoint 6 vouched for checkpoint 5: %v", vs)
	}
}

func TestNewWitnessPolicyRefuses(t *testing.T) {
	w1, w2 := newTestWitness(t, "w1.example"), newTestWitness(t, "w2.example")
	w1b := newTestWitness(t, "w1.example")
	for _, tc := range []struct {
		name   string
		keys   []string
		quorum int
		want   string
	}{
		{"no keys", nil, 1, "no witness keys"},
		{"zero quorum", []string{w1.vkey}, 0, "want at least 1"},
		{"quorum over count", []string{w1.vkey, w2.vkey}, 3, "could never be met"},
		{"name twice", []string{w1.vkey, w1b.vkey}, 1, "already listed"},
		{"not a key", []string{"w1.example+0000+AAAA"}, 1, "witness 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewWitnessPolicy(tc.keys, tc.quorum)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestParseCosignaturesRefuses(t *testing.T) {
	for _, body := range []string{
		"", "— w1.example AAAA", "- w1.example AAAAAAAAAAAAAAAA\n", "— w2.example AAAAAAAAAAAAAAAA\n",
		"— w1.example not*base64\n", "— w1.example AAAA\n",
	} {
		if _, err := ParseCosignatures(1, "w1.example", []byte(body)); err == nil {
			t.Errorf("ParseCosignatures(%q) accepted it", body)
		}
	}
}
