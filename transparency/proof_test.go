package transparency

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// testTree is an in-memory tree of entries, built the way the stores build
// theirs (AppendHashes).
type testTree struct {
	entries [][]byte
	hashes  map[int64]tlog.Hash
}

func (t *testTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		h, ok := t.hashes[idx]
		if !ok {
			return nil, errNotStored(idx)
		}
		out[i] = h
	}
	return out, nil
}

type errNotStored int64

func (e errNotStored) Error() string { return "hash not stored" }

func (t *testTree) add(t0 testing.TB, entries ...[]byte) {
	t0.Helper()
	hs, err := AppendHashes(int64(len(t.entries)), entries, t)
	if err != nil {
		t0.Fatal(err)
	}
	for _, h := range hs {
		if _, dup := t.hashes[h.Index]; dup {
			t0.Fatalf("hash %d stored twice", h.Index)
		}
		t.hashes[h.Index] = h.Hash
	}
	t.entries = append(t.entries, entries...)
}

func testSigner(t testing.TB, origin string) (*Signer, []note.Verifier) {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(origin, k)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := ParseVerifierKeys(strings.Join(s.VerifierKeys(), "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return s, vs
}

func testRecord(seq int64) audit.Record {
	sum := sha256.Sum256([]byte{byte(seq)})
	return audit.Record{
		Seq: seq, Time: time.Date(2026, 11, 23, 12, 0, 0, int(seq), time.UTC), Caller: "token:ci",
		CardName: "Agent", CardVersion: "1.0", CanonicalSHA256: sum[:], KID: "k1", Alg: "ES256",
		Profile: "spec", Signature: "sig" + string(rune('a'+seq%26)), Outcome: audit.OutcomeSigned, Hash: sum[:],
	}
}

func TestProofRoundTrip(t *testing.T) {
	s, keys := testSigner(t, "example.com/log")
	tree := &testTree{hashes: map[int64]tlog.Hash{}}
	// Appended in uneven batches, as audit transactions are.
	for _, batch := range []int{1, 2, 5, 1, 9, 300} {
		var es [][]byte
		for range batch {
			rec := testRecord(int64(len(tree.entries) + len(es) + 1))
			es = append(es, NewEntry(rec, []string{"Agent.Example.com."}).Marshal())
		}
		tree.add(t, es...)
	}
	size := int64(len(tree.entries))
	root, err := tlog.TreeHash(size, tree)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := s.Sign(size, root)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range tree.entries {
		p, err := Prove(e, int64(i), size, cp, tree)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := ParseProof(p.Marshal())
		if err != nil {
			t.Fatalf("leaf %d: %v\n%s", i, err, p.Marshal())
		}
		entry, got, err := parsed.Verify(keys)
		if err != nil {
			t.Fatalf("leaf %d: %v", i, err)
		}
		if got.Size != size || got.Root != root || entry.Seq != int64(i)+1 {
			t.Fatalf("leaf %d: checkpoint %d/%v entry seq %d", i, got.Size, got.Root, entry.Seq)
		}
		if !entry.MatchesHost("agent.example.com") {
			t.Fatalf("leaf %d: hosts %v", i, entry.Card.Hosts)
		}
	}
}

func TestProofRefusals(t *testing.T) {
	s, keys := testSigner(t, "example.com/log")
	_, otherKeys := testSigner(t, "example.com/log")
	tree := &testTree{hashes: map[int64]tlog.Hash{}}
	for i := range 10 {
		tree.add(t, NewEntry(testRecord(int64(i+1)), nil).Marshal())
	}
	root, _ := tlog.TreeHash(10, tree)
	cp, _ := s.Sign(10, root)
	good, err := Prove(tree.entries[3], 3, 10, cp, tree)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(p *Proof)
		keys   []note.Verifier
		want   string
	}{
		{"another log key", func(p *Proof) {}, otherKeys, "not signed by a trusted log key"},
		{"entry edited", func(p *Proof) {
			e, _ := ParseEntry(p.Entry)
			e.Caller = "someone else"
			p.Entry = e.Marshal()
		}, keys, "does not lead to the root"},
		{"entry of another leaf", func(p *Proof) { p.Entry = tree.entries[4] }, keys, "is for leaf 3 but its entry is of audit record 5"},
		{"hash flipped", func(p *Proof) { p.Hashes[0][0] ^= 1 }, keys, "does not lead to the root"},
		{"hash dropped", func(p *Proof) { p.Hashes = p.Hashes[1:] }, keys, "does not lead to the root"},
		{"index past the tree", func(p *Proof) { p.Index = 10 }, keys, "leaf 10 but its entry"},
		{"checkpoint edited", func(p *Proof) {
			p.Checkpoint = []byte(strings.Replace(string(p.Checkpoint), "\n10\n", "\n11\n", 1))
		}, keys, "checkpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := good
			p.Hashes = append([]tlog.Hash(nil), good.Hashes...)
			tt.mutate(&p)
			parsed, err := ParseProof(p.Marshal())
			if err == nil {
				_, _, err = parsed.Verify(tt.keys)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestParseProofForm(t *testing.T) {
	entry := base64.StdEncoding.EncodeToString([]byte("{}"))
	h := base64.StdEncoding.EncodeToString(make([]byte, 32))
	tests := []struct{ name, text, want string }{
		{"no magic", "c2sp.org/tlog-proof@v2\nextra " + entry + "\nindex 0\n\ncp", "does not start with"},
		{"no checkpoint", "c2sp.org/tlog-proof@v1\nextra " + entry + "\nindex 0\n", "no checkpoint"},
		{"no extra", "c2sp.org/tlog-proof@v1\nindex 0\n\ncp", "no extra line"},
		{"leading zero", "c2sp.org/tlog-proof@v1\nextra " + entry + "\nindex 01\n\ncp", "leading zeros"},
		{"negative", "c2sp.org/tlog-proof@v1\nextra " + entry + "\nindex -1\n\ncp", "leading zeros"},
		{"short hash", "c2sp.org/tlog-proof@v1\nextra " + entry + "\nindex 0\nAAAA\n\ncp", "not a base64 SHA-256"},
		{"too many hashes", "c2sp.org/tlog-proof@v1\nextra " + entry + "\nindex 0\n" + strings.Repeat(h+"\n", 64) + "\ncp", "more than a tree can need"},
		{"too long", strings.Repeat("x", MaxProofBytes+1), "over the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseProof(tt.text)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCoSignedCheckpoint(t *testing.T) {
	// During a log key rotation both keys sign: a verifier that knows
	// either accepts, one that knows neither does not.
	k1, _ := GenerateKey()
	k2, _ := GenerateKey()
	both, err := NewSigner("example.com/log", k1, k2)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := both.Sign(3, tlog.Hash{1})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []ed25519.PrivateKey{k1, k2} {
		vkey, _ := VerifierKey("example.com/log", k.Public())
		vs, _ := ParseVerifierKeys(vkey)
		if c, err := OpenCheckpoint(cp, vs); err != nil || c.Size != 3 {
			t.Fatalf("key %d: %v", i+1, err)
		}
	}
	_, stranger := testSigner(t, "example.com/log")
	if _, err := OpenCheckpoint(cp, stranger); err == nil {
		t.Fatal("a checkpoint signed by unknown keys was accepted")
	}
	if _, err := NewSigner("example.com/log", k1, k1); err == nil {
		t.Fatal("a key listed twice was accepted")
	}
	// A key named for another origin does not vouch for this log.
	other, _ := NewSigner("other.example/log", k1)
	cp2, _ := other.Sign(3, tlog.Hash{1})
	vkey, _ := VerifierKey("example.com/log", k1.Public())
	vs, _ := ParseVerifierKeys(vkey)
	if _, err := OpenCheckpoint(cp2, vs); err == nil {
		t.Fatal("a checkpoint of another origin was accepted")
	}
}

func TestCheckOrigin(t *testing.T) {
	for _, bad := range []string{"", "https://x.example/log", "x.example/a b", "x+y.example"} {
		if CheckOrigin(bad) == nil {
			t.Errorf("origin %q accepted", bad)
		}
	}
	if err := CheckOrigin("cardsign.example.com/log"); err != nil {
		t.Error(err)
	}
}

func TestRetiredKeysStillVerify(t *testing.T) {
	// A rotation done: the new key signs, the old one is retired; proofs
	// under checkpoints the old key signed still verify with the published
	// keys.
	old, _ := GenerateKey()
	oldSigner, _ := NewSigner("example.com/log", old)
	cp, _ := oldSigner.Sign(1, tlog.RecordHash([]byte("x")))
	fresh, _ := GenerateKey()
	s, _ := NewSigner("example.com/log", fresh)
	oldKey := oldSigner.VerifierKeys()[0]
	if err := s.Retire(oldKey, oldKey); err != nil {
		t.Fatal(err)
	}
	if got := s.VerifierKeys(); len(got) != 2 || got[1] != oldKey || len(s.SigningKeys()) != 1 {
		t.Fatalf("published %v, signing %v", got, s.SigningKeys())
	}
	if _, err := OpenCheckpoint(cp, s.Verifiers()); err != nil {
		t.Fatalf("a checkpoint of the retired key: %v", err)
	}
	other, _ := NewSigner("other.example/log", old)
	if err := s.Retire(other.VerifierKeys()[0]); err == nil {
		t.Fatal("a key of another origin was retired into this log")
	}
}

// TestProofMarshalForm: Marshal writes the C2SP tlog-proof form exactly,
// whatever the entry's length (it encodes the entry in pieces), and
// ParseProof reads back what it wrote.
func TestProofMarshalForm(t *testing.T) {
	hashes := []tlog.Hash{sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))}
	for _, n := range []int{0, 1, 2, 3, 767, 768, 769, 2000} {
		entry := make([]byte, n)
		for i := range entry {
			entry[i] = byte(i*7 + n)
		}
		p := Proof{Entry: entry, Index: int64(n) * 1000003, Hashes: hashes, Checkpoint: []byte("origin\n1\nroot\n\n— sig\n")}
		enc := base64.StdEncoding
		want := "c2sp.org/tlog-proof@v1\nextra " + enc.EncodeToString(entry) + "\nindex " + strconv.FormatInt(p.Index, 10) + "\n" +
			enc.EncodeToString(hashes[0][:]) + "\n" + enc.EncodeToString(hashes[1][:]) + "\n\n" + string(p.Checkpoint)
		got := p.Marshal()
		if got != want {
			t.Fatalf("entry of %d bytes: Marshal =\n%q\nwant\n%q", n, got, want)
		}
		if n == 0 {
			continue // no entry is empty: the form is what matters here
		}
		back, err := ParseProof(got)
		if err != nil || !bytes.Equal(back.Entry, entry) || back.Index != p.Index || len(back.Hashes) != 2 {
			t.Fatalf("entry of %d bytes: ParseProof = %+v, %v", n, back, err)
		}
	}
}
