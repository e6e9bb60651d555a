package signer

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
)

const pythonVectors = "../testdata/vectors/a2a-python-1.1.0"

// TestVerifyA2APythonVectors: the cards a2a-python 1.1.0 signed (EdDSA and
// ES256) verify, over python-ascii bytes, and the portability report says
// which other verifiers would accept them: all of them only when the card's
// bytes are the same everywhere.
func TestVerifyA2APythonVectors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(pythonVectors, "jwks.json"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := jwks.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(pythonVectors, "*.signed.json"))
	if len(files) != 8 {
		t.Fatalf("%d signed vectors, want 8", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".signed.json")
		card, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		v, err := Verify(context.Background(), card, VerifyOptions{Trusted: set})
		if err != nil || !v.Valid(true) {
			t.Fatalf("%s: a2a-python's own signatures do not verify: %+v %v", name, v, err)
		}
		rows := v.Portability()
		if len(rows) != 4 || !rows[3].Covered || rows[3].Verifier != "a2a-python ≤1.1" {
			t.Fatalf("%s: portability %+v", name, rows)
		}
		// Vectors b-e hold non-ASCII text, numbers or mixed key order:
		// RFC 8785 verifiers compute other bytes than a2a-python 1.1 signed.
		same := !strings.ContainsAny(name[:1], "bcde")
		if rows[1].Covered != same || rows[2].Covered != same {
			t.Errorf("%s: sdk families covered %v/%v, want %v: %s", name, rows[1].Covered, rows[2].Covered, same, FormatPortability("", rows))
		}
	}
}

// TestPythonASCIISignatureCoversOnlyItsBytes: a signature marked
// python-ascii is never taken for a signature over the spec or sdk bytes,
// and the report says so.
func TestPythonASCIISignatureCoversOnlyItsBytes(t *testing.T) {
	k := newKey(t, jose.ES256)
	res, err := Sign(context.Background(), readCard(t, "unicode.json"), Options{Keys: []Key{k.Key}, Mode: ModePythonASCII})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := b64.DecodeString(res.Signatures[0].Protected)
	if !strings.Contains(string(raw), `"`+ProfileHeader+`":"python-ascii"`) {
		t.Fatalf("python-ascii signature header %s lacks its marker", raw)
	}
	for _, p := range []card.Profile{card.ProfileSpec, card.ProfileSDK} {
		v, err := Verify(context.Background(), res.Card, VerifyOptions{Trusted: keySet(k), Profile: p})
		if err != nil || v.Valid(false) {
			t.Fatalf("a python-ascii signature passed as %s: %+v %v", p, v, err)
		}
	}
	v, err := Verify(context.Background(), res.Card, VerifyOptions{Trusted: keySet(k)})
	if err != nil || !v.Valid(true) {
		t.Fatalf("%+v %v", v, err)
	}
	got := FormatPortability("verifies in: ", v.Portability())
	want := "verifies in: spec ✘ (no signature over spec bytes)  @a2a-js/sdk ≥1.3 ✘ (no signature over sdk bytes)  a2a-python ≥1.2 ✘ (no signature over sdk bytes)  a2a-python ≤1.1 ✔"
	if got != want {
		t.Fatalf("report\n%s\nwant\n%s", got, want)
	}
}
