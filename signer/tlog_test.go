package signer

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// memTree is a tree of log entries in memory, built as the stores build it.
type memTree map[int64]tlog.Hash

func (m memTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		out[i] = m[idx]
	}
	return out, nil
}

// loggedCard signs a card and logs its signatures after some earlier
// leaves, as cardsignd does, returning the card with its proofs and the log
// keys.
func loggedCard(t *testing.T, name string) (*Result, testKey, []note.Verifier) {
	t.Helper()
	return loggedData(t, testsupport.Card(t, name))
}

// loggedData is loggedCard for a card given by its bytes.
func loggedData(t *testing.T, data []byte) (*Result, testKey, []note.Verifier) {
	t.Helper()
	k := newKey(t, jose.ES256)
	res, err := Sign(t.Context(), data, Options{Keys: []Key{k.Key}})
	if err != nil {
		t.Fatal(err)
	}
	tree := memTree{}
	var entries [][]byte
	for i := range 5 { // earlier records: the card's leaves are not the first
		entries = append(entries, transparency.NewEntry(audit.Record{Seq: int64(i + 1), Time: time.Now(), Hash: make([]byte, 32)}, nil).Marshal())
	}
	for _, s := range res.Signatures {
		rec := audit.Record{Seq: int64(len(entries) + 1), Time: time.Now(), CardName: "x", CanonicalSHA256: res.CanonicalSHA256[:],
			KID: s.KID, Alg: string(s.Alg), Profile: string(s.Profile), Signature: s.Value, Hash: make([]byte, 32)}
		entries = append(entries, transparency.NewEntry(rec, nil).Marshal())
	}
	hs, err := transparency.AppendHashes(0, entries, tree)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		tree[h.Index] = h.Hash
	}
	size := int64(len(entries))
	root, _ := tlog.TreeHash(size, tree)
	lk, _ := transparency.GenerateKey()
	ls, err := transparency.NewSigner("example.com/log", lk)
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := ls.Sign(size, root)
	headers := make([]strictjson.Value, len(res.Signatures))
	for i := range res.Signatures {
		idx := size - int64(len(res.Signatures)) + int64(i)
		p, err := transparency.Prove(entries[idx], idx, size, cp, tree)
		if err != nil {
			t.Fatal(err)
		}
		headers[i] = strictjson.ObjectValue(strictjson.Member{Key: transparency.HeaderMember, Val: strictjson.StringValue(p.Marshal())})
	}
	if err := res.SetHeaders(headers); err != nil {
		t.Fatal(err)
	}
	keys, err := transparency.ParseVerifierKeys(ls.VerifierKeys()[0])
	if err != nil {
		t.Fatal(err)
	}
	return res, k, keys
}

func TestVerifyInclusionProofs(t *testing.T) {
	// divergent.json is signed under three profiles: three signatures,
	// three leaves, three proofs.
	res, k, keys := loggedCard(t, "divergent.json")
	v := mustVerify(t, res.Card, VerifyOptions{Trusted: keySet(k), LogKeys: keys, RequireLog: true})
	if len(v.Checks) != 3 || !v.Valid(true) {
		t.Fatalf("checks %+v", v.Checks)
	}
	for i, c := range v.Checks {
		if c.Logged == nil || c.Logged.Index != int64(5+i) || c.Logged.Size != 8 || c.Logged.Origin != "example.com/log" {
			t.Fatalf("signature %d logged as %+v", i, c.Logged)
		}
	}
	// Without log keys the proofs are not checked, only noticed.
	v, _ = Verify(t.Context(), res.Card, VerifyOptions{Trusted: keySet(k)})
	if !v.Valid(true) || !v.Checks[0].HasProof || v.Checks[0].Logged != nil {
		t.Fatalf("without log keys: %+v", v.Checks)
	}
}

// editSignatures rewrites the card's signatures array.
func editSignatures(t *testing.T, data []byte, edit func(sigs []map[string]any)) []byte {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(c["signatures"])
	var sigs []map[string]any
	_ = json.Unmarshal(raw, &sigs)
	edit(sigs)
	c["signatures"] = sigs
	out, _ := json.Marshal(c)
	return out
}

func TestVerifyInclusionProofRefusals(t *testing.T) {
	res, k, keys := loggedCard(t, "divergent.json")
	_, _, strangerKeys := loggedCard(t, "security.json")
	tests := []struct {
		name string
		card []byte
		keys []note.Verifier
		want string
	}{
		{"stripped", editSignatures(t, res.Card, func(s []map[string]any) { delete(s[0], "header") }), keys, "carries no transparency-log inclusion proof"},
		{"swapped", editSignatures(t, res.Card, func(s []map[string]any) { s[0]["header"], s[1]["header"] = s[1]["header"], s[0]["header"] }), keys, "another signature"},
		{"not a string", editSignatures(t, res.Card, func(s []map[string]any) { s[0]["header"] = map[string]any{transparency.HeaderMember: 1} }), keys, "must be a string"},
		{"garbled", editSignatures(t, res.Card, func(s []map[string]any) {
			s[0]["header"] = map[string]any{transparency.HeaderMember: "c2sp.org/tlog-proof@v1\nindex 0\n\nx"}
		}), keys, "no extra line"},
		{"another log", res.Card, strangerKeys, "not signed by a trusted log key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := mustVerify(t, tt.card, VerifyOptions{Trusted: keySet(k), LogKeys: tt.keys, RequireLog: true})
			c := v.Checks[0]
			if c.Valid || !strings.Contains(c.Reason, tt.want) {
				t.Fatalf("signature 0: valid=%v reason %q, want %q", c.Valid, c.Reason, tt.want)
			}
		})
	}
	// Log keys without RequireLog: a signature without a proof counts, one
	// with a bad proof does not.
	v, err := Verify(t.Context(), tests[0].card, VerifyOptions{Trusted: keySet(k), LogKeys: keys})
	if err != nil || !v.Checks[0].Valid || v.Checks[1].Logged == nil {
		t.Fatalf("proof not required: %+v %v", v, err)
	}
	v, _ = Verify(t.Context(), tests[1].card, VerifyOptions{Trusted: keySet(k), LogKeys: keys})
	if v.Checks[0].Valid {
		t.Fatal("a swapped proof was accepted when proofs are not required")
	}
	// A card stripped of every proof is a plain signed card again.
	stripped := editSignatures(t, res.Card, func(s []map[string]any) {
		for _, sig := range s {
			delete(sig, "header")
		}
	})
	v, err = Verify(t.Context(), stripped, VerifyOptions{Trusted: keySet(k)})
	if err != nil || !v.Valid(true) {
		t.Fatalf("stripped card: %+v %v", v, err)
	}
}

func TestSetHeadersRefusesProtectedNames(t *testing.T) {
	k := newKey(t, jose.ES256)
	res, err := Sign(t.Context(), testsupport.Card(t, "security.json"), Options{Keys: []Key{k.Key}})
	if err != nil {
		t.Fatal(err)
	}
	h := strictjson.ObjectValue(strictjson.Member{Key: "kid", Val: strictjson.StringValue("x")})
	if err := res.SetHeaders([]strictjson.Value{h}); err == nil || !strings.Contains(err.Error(), "may be protected") {
		t.Fatalf("got %v", err)
	}
	if err := res.SetHeaders(nil); err == nil {
		t.Fatal("a header count that is not the signature count was accepted")
	}
}
