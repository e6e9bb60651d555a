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
		if len(rows) != 5 || !rows[3].Covered || rows[3].Verifier != "a2a-python ≤1.1" || rows[4].Verifier != "@a2a-js/sdk resolver" {
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
	want := "verifies in: spec ✘ (no signature over spec bytes)  @a2a-js/sdk ≥1.3 ✘ (no signature over sdk bytes)  a2a-python ≥1.2 ✘ (no signature over sdk bytes)  a2a-python ≤1.1 ✔  @a2a-js/sdk resolver ✘ (no signature over sdk bytes)"
	if got != want {
		t.Fatalf("report\n%s\nwant\n%s", got, want)
	}
}

// TestJSResolverRow (issue 24 #21): @a2a-js/sdk's own resolver drops a
// card's securitySchemes before its verifier canonicalizes (a2a-js#663), so
// the report marks that path as the SDK's bug for a card with schemes, and
// covered like @a2a-js/sdk ≥1.3 for one without (or whose only schemes are
// empty, which the sdk bytes drop anyway). The real resolver agrees in
// cmd/cardsign's TestInteropJSResolver.
func TestJSResolverRow(t *testing.T) {
	tests := []struct {
		card   string
		strip  bool
		want   bool
		reason string
	}{
		{"security.json", false, false, ReasonJSResolverBug},
		{"spec-sample.json", true, false, ReasonJSResolverBug},
		{"unicode.json", false, true, ""},
		{"interfaces.json", false, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.card, func(t *testing.T) {
			p, err := Prepare(readCard(t, tc.card), PrepareOptions{Card: card.Options{StripUnknown: tc.strip}})
			if err != nil {
				t.Fatal(err)
			}
			row := p.Portability[len(p.Portability)-1]
			if row.Verifier != "@a2a-js/sdk resolver" || row.Covered != tc.want || row.Reason != tc.reason {
				t.Fatalf("resolver row %+v, want covered %v (%s)", row, tc.want, tc.reason)
			}
			if got := FormatPortability("", []Support{row}); !tc.want && got != "@a2a-js/sdk resolver ✘ (SDK bug a2a-js#663)" {
				t.Fatalf("printed %q", got)
			}
		})
	}
}
