package signer

import (
	"crypto"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/strictjson"
	"golang.org/x/mod/sumdb/note"
)

const pythonVectors = "../testdata/vectors/a2a-python-1.1.0"

// readPythonVector reads one file of the a2a-python 1.1.0 vectors.
func readPythonVector(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(pythonVectors, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// pythonVectorKeys is the key set the a2a-python 1.1.0 vectors were signed
// with.
func pythonVectorKeys(t *testing.T) jwks.Set {
	t.Helper()
	set, err := jwks.Parse(readPythonVector(t, "jwks.json"))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestVerifyA2APythonVectors: the cards a2a-python 1.1.0 signed (EdDSA and
// ES256) verify, over python-ascii bytes, and the portability report says
// which other verifiers would accept them: all of them only when the card's
// bytes are the same everywhere.
func TestVerifyA2APythonVectors(t *testing.T) {
	set := pythonVectorKeys(t)
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
		v, err := Verify(t.Context(), card, VerifyOptions{Trusted: set})
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
	res, err := Sign(t.Context(), testsupport.Card(t, "unicode.json"), Options{Keys: []Key{k.Key}, Mode: ModePythonASCII})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := b64.DecodeString(res.Signatures[0].Protected)
	if !strings.Contains(string(raw), `"`+ProfileHeader+`":"python-ascii"`) {
		t.Fatalf("python-ascii signature header %s lacks its marker", raw)
	}
	for _, p := range []card.Profile{card.ProfileSpec, card.ProfileSDK} {
		v, err := Verify(t.Context(), res.Card, VerifyOptions{Trusted: keySet(k), Profile: p})
		if err != nil || v.Valid(false) {
			t.Fatalf("a python-ascii signature passed as %s: %+v %v", p, v, err)
		}
	}
	v, err := Verify(t.Context(), res.Card, VerifyOptions{Trusted: keySet(k)})
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
			p, err := Prepare(testsupport.Card(t, tc.card), PrepareOptions{Card: card.Options{StripUnknown: tc.strip}})
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

// signReading signs the sdk bytes of one reading of a v0.3 card the way an
// SDK that maps it so would, and returns the v0.3 card with that signature.
func signReading(t *testing.T, k testKey, v03 []byte, m card.Mapping) []byte {
	t.Helper()
	l, err := card.Load(v03, card.Options{})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := card.Canonical(l.Reading(m).Value, card.ProfileSDK)
	if err != nil {
		t.Fatal(err)
	}
	prot := b64.EncodeToString([]byte(`{"alg":"EdDSA","kid":"` + k.KID + `","typ":"JOSE"}`))
	sig, err := k.Signer.Sign(rand.Reader, signingInput(prot, payload), crypto.Hash(0))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := card.Parse(v03, strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	s := strictjson.ObjectValue(strictjson.Member{Key: "protected", Val: strictjson.StringValue(prot)}, strictjson.Member{Key: "signature", Val: strictjson.StringValue(b64.EncodeToString(sig))})
	return strictjson.ObjectValue(append(raw.Obj, strictjson.Member{Key: "signatures", Val: strictjson.ArrayValue(s)})...).Compact()
}

// TestVerifyV03Readings (issue 24 #20): a v0.3 card verifies under the
// reading of whichever SDK signed it, and the check says which: the real
// a2a-python 1.1.0 vector byte for byte (its protocolVersion "0.3.0" on
// every interface), @a2a-js/sdk's reading (on the first only) and
// cardsign's own ("0.3"). An altered card verifies under none.
func TestVerifyV03Readings(t *testing.T) {
	vector := readPythonVector(t, "g_v03_legacy.input-signed.json")
	input := readPythonVector(t, "g_v03_legacy.input.json")
	pythonKeys := pythonVectorKeys(t)
	k := newKey(t, jose.EdDSA)
	tampered := strings.Replace(string(signReading(t, k, input, card.MappingJS)), "Legacy Weather Agent", "Legacy Weather AgenT", 1)
	tests := []struct {
		name    string
		data    []byte
		trusted KeySource
		want    card.Mapping // "": invalid
		// the portability report, family by family
		report string
	}{
		{"a2a-python 1.1.0 vector", vector, pythonKeys, card.MappingPython,
			"spec ✘ (no signature over spec bytes)  @a2a-js/sdk ≥1.3 ✘ (no signature over sdk bytes)  a2a-python ≥1.2 ✔  a2a-python ≤1.1 ✔  @a2a-js/sdk resolver ✘ (SDK bug a2a-js#663)"},
		{"@a2a-js/sdk reading", signReading(t, k, input, card.MappingJS), keySet(k), card.MappingJS,
			"spec ✘ (no signature over spec bytes)  @a2a-js/sdk ≥1.3 ✔  a2a-python ≥1.2 ✘ (no signature over sdk bytes)  a2a-python ≤1.1 ✘ (no signature over python-ascii bytes)  @a2a-js/sdk resolver ✘ (SDK bug a2a-js#663)"},
		{"cardsign reading", signReading(t, k, input, card.MappingCardsign), keySet(k), card.MappingCardsign,
			"spec ✘ (no signature over spec bytes)  @a2a-js/sdk ≥1.3 ✘ (no signature over sdk bytes)  a2a-python ≥1.2 ✘ (no signature over sdk bytes)  a2a-python ≤1.1 ✘ (no signature over python-ascii bytes)  @a2a-js/sdk resolver ✘ (SDK bug a2a-js#663)"},
		{"altered after signing", []byte(tampered), keySet(k), "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := mustVerify(t, tc.data, VerifyOptions{Trusted: tc.trusted})
			if tc.want == "" {
				if v.Valid(false) || !strings.Contains(v.Checks[0].Reason, "under any v0.3 mapping") {
					t.Fatalf("an altered card: %+v", v.Checks)
				}
				return
			}
			if !v.Valid(true) {
				t.Fatalf("want every signature valid: %+v", v.Checks)
			}
			for _, c := range v.Checks {
				if c.Mapping != tc.want {
					t.Errorf("signature[%d] verified under the %q reading, want %q", c.Index, c.Mapping, tc.want)
				}
			}
			if got := FormatPortability("", v.Portability()); got != tc.report {
				t.Errorf("report\n%s\nwant\n%s", got, tc.report)
			}
		})
	}
}

// revokedAsV03 is review #1's construction: a v1.0 card C (signed, with
// inclusion proofs) whose every interface is on protocolVersion "1.0", and
// C's signatures on the v0.3 card that a2a-python reads as C byte for byte,
// the card saying "protocolVersion": "1.0". Cardsign's own reading of the
// v0.3 card ("0.3" on every interface) is other bytes.
func revokedAsV03(t *testing.T) (c *Result, v03 []byte, k testKey, logKeys []note.Verifier) {
	t.Helper()
	v03src := strings.Replace(string(testsupport.Card(t, "v03.json")), `"protocolVersion": "0.3.0"`, `"protocolVersion": "1.0"`, 1)
	l, err := card.Load([]byte(v03src), card.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs := l.Readings()
	if len(rs) < 2 || rs[1].Mapping != card.MappingPython {
		t.Fatalf("readings %+v: want cardsign's and a2a-python's", rs)
	}
	c, k, logKeys = loggedData(t, rs[1].Value.Compact())
	return c, testsupport.WithSignatures(t, []byte(v03src), c.Card), k, logKeys
}

// TestVerifyRevokedCardAsV03 (review #1): a revoked v1.0 card rewritten as
// v0.3 is still revoked. Its signatures verify over the a2a-python reading,
// which is the revoked card, so that reading's canonical SHA-256 is looked
// up too, not only cardsign's reading's. Their inclusion proofs, which name
// the revoked card's SHA-256, hold for that reading.
func TestVerifyRevokedCardAsV03(t *testing.T) {
	c, v03, k, logKeys := revokedAsV03(t)
	revokedCard := func(sum [32]byte) (string, bool) {
		return "agent payments version 1, revoked: leaked", sum == c.CanonicalSHA256
	}
	// The construction holds: without the revocation the v0.3 card
	// verifies, under a2a-python's reading, proofs and all.
	v := mustVerify(t, v03, VerifyOptions{Trusted: keySet(k), LogKeys: logKeys, RequireLog: true})
	if !v.Valid(true) || v.Checks[0].Mapping != card.MappingPython || v.Checks[0].Logged == nil {
		t.Fatalf("the v0.3 rewrite of C: %+v", v.Checks)
	}
	if v.CanonicalSHA256 == c.CanonicalSHA256 {
		t.Fatal("cardsign's reading of the v0.3 card is C: the test shows nothing")
	}
	// The original, and its v0.3 rewrite, are both revoked.
	for name, data := range map[string][]byte{"v1.0 original": c.Card, "v0.3 rewrite": v03} {
		v := mustVerify(t, data, VerifyOptions{Trusted: keySet(k), RevokedCard: revokedCard})
		if v.Valid(false) || !strings.Contains(v.CardRevoked, "leaked") {
			t.Errorf("%s: valid %v, CardRevoked %q; want revoked", name, v.Valid(false), v.CardRevoked)
		}
	}
}
