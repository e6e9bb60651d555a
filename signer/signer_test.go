package signer

import (
	"crypto"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/strictjson"
)

type testKey struct {
	Key
	jwk jose.JWK
}

func newKey(t testing.TB, alg jose.Alg) testKey {
	t.Helper()
	s := testsupport.Key(t, alg)
	jwk, err := jose.NewJWK(s.Public(), "", alg)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{Key{Signer: s, Alg: alg, KID: jwk.Kid}, jwk}
}

func keySet(keys ...testKey) jwks.Set {
	var s jwks.Set
	for _, k := range keys {
		s.Keys = append(s.Keys, k.jwk)
	}
	return s
}

// mustVerify verifies data with opts, failing the test on an error (not on
// a card that does not verify: that is in the result).
func mustVerify(t *testing.T, data []byte, opts VerifyOptions) *Verification {
	t.Helper()
	v, err := Verify(t.Context(), data, opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSignModes(t *testing.T) {
	k := newKey(t, jose.ES256)
	tests := []struct {
		card     string
		mode     Mode
		profiles []card.Profile
	}{
		{"security.json", ModeAuto, []card.Profile{card.ProfileSpec}},
		{"security.json", ModeBoth, []card.Profile{card.ProfileSpec}}, // same bytes: one signature serves both
		// § and a number in params: a2a-python ≤ 1.1 computes bytes of its own.
		{"divergent.json", ModeAuto, []card.Profile{card.ProfileSpec, card.ProfileSDK, card.ProfilePythonASCII}},
		{"divergent.json", ModeSpec, []card.Profile{card.ProfileSpec}},
		{"divergent.json", ModeSDK, []card.Profile{card.ProfileSDK}},
		{"divergent.json", ModePythonASCII, []card.Profile{card.ProfilePythonASCII}},
		// Only non-ASCII text: spec and sdk bytes are one, python-ascii another.
		{"unicode.json", ModeAuto, []card.Profile{card.ProfileSpec, card.ProfilePythonASCII}},
	}
	for _, tc := range tests {
		t.Run(tc.card+"/"+string(tc.mode), func(t *testing.T) {
			res, err := Sign(t.Context(), testsupport.Card(t, tc.card), Options{Keys: []Key{k.Key}, Mode: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			var got []card.Profile
			for _, s := range res.Signatures {
				got = append(got, s.Profile)
			}
			if !slices.Equal(got, tc.profiles) {
				t.Fatalf("profiles %v, want %v", got, tc.profiles)
			}
			// Whatever was signed, every verifier family is covered in auto
			// mode, but for @a2a-js/sdk's resolver path when it loses the
			// card's security schemes (a2a-js#663): no signature can serve it.
			for _, s := range res.Portability {
				if tc.mode == ModeAuto && !s.Covered && s.Reason != ReasonJSResolverBug {
					t.Fatalf("auto mode leaves %s uncovered: %+v", s.Verifier, res.Portability)
				}
			}
			if (len(res.Divergences) > 0) != (tc.card == "divergent.json" && tc.mode == ModeAuto) {
				t.Fatalf("divergences %v", res.Divergences)
			}
			v, err := Verify(t.Context(), res.Card, VerifyOptions{Trusted: keySet(k)})
			if err != nil || !v.Valid(true) {
				t.Fatalf("own signatures do not verify: %+v %v", v, err)
			}
			for i, c := range v.Checks {
				if c.Profile != tc.profiles[i] {
					t.Fatalf("signature %d verified as %s, want %s", i, c.Profile, tc.profiles[i])
				}
			}
		})
	}
}

func TestSignDeterministicProtectedHeader(t *testing.T) {
	k := newKey(t, jose.EdDSA)
	opts := Options{Keys: []Key{k.Key}, JKU: "https://keys.example.com/jwks.json"}
	a, err := Sign(t.Context(), testsupport.Card(t, "params.json"), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Sign(t.Context(), testsupport.Card(t, "params.json"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if a.Signatures[0].Protected != b.Signatures[0].Protected {
		t.Fatal("protected header is not deterministic")
	}
	raw, _ := b64.DecodeString(a.Signatures[0].Protected)
	want := `{"alg":"EdDSA","jku":"https://keys.example.com/jwks.json","kid":"` + k.KID + `","typ":"JOSE"}`
	if string(raw) != want {
		t.Fatalf("protected header %s, want %s", raw, want)
	}
	// Ed25519 is deterministic: same card, same key, same signature.
	if a.Signatures[0].Value != b.Signatures[0].Value {
		t.Fatal("EdDSA signatures of the same input differ")
	}
}

func TestSignReplacesOrKeepsSignatures(t *testing.T) {
	k1, k2 := newKey(t, jose.ES256), newKey(t, jose.EdDSA)
	first, err := Sign(t.Context(), testsupport.Card(t, "interfaces.json"), Options{Keys: []Key{k1.Key}})
	if err != nil {
		t.Fatal(err)
	}
	replaced, err := Sign(t.Context(), first.Card, Options{Keys: []Key{k2.Key}})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := Sign(t.Context(), first.Card, Options{Keys: []Key{k2.Key}, KeepSignatures: true})
	if err != nil {
		t.Fatal(err)
	}
	count := func(b []byte) int { return strings.Count(string(b), `"protected"`) }
	if count(replaced.Card) != 1 || count(kept.Card) != 2 {
		t.Fatalf("replace gave %d signatures, keep gave %d; want 1 and 2", count(replaced.Card), count(kept.Card))
	}
	v, err := Verify(t.Context(), kept.Card, VerifyOptions{Trusted: keySet(k1, k2)})
	if err != nil || !v.Valid(true) {
		t.Fatalf("kept signatures must all verify (signatures are outside the payload): %+v %v", v, err)
	}
}

func TestSignRefuses(t *testing.T) {
	k := newKey(t, jose.ES256)
	_, err := Sign(t.Context(), testsupport.Card(t, "spec-sample.json"), Options{Keys: []Key{k.Key}})
	var le *card.LintError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "security") {
		t.Fatalf("card with unknown keys: %v, want *card.LintError naming security", err)
	}
	if _, err := Sign(t.Context(), testsupport.Card(t, "spec-sample.json"), Options{Keys: []Key{k.Key}, Card: card.Options{StripUnknown: true}}); err != nil {
		t.Fatalf("--strip-unknown must make the sample signable: %v", err)
	}
	var ce *strictjson.Error
	if _, err := Sign(t.Context(), []byte(`{"name":"a","name":"b"}`), Options{Keys: []Key{k.Key}}); !errors.As(err, &ce) || ce.Rule != strictjson.RuleDuplicateKey {
		t.Fatalf("duplicate keys: %v", err)
	}
	if _, err := Sign(t.Context(), testsupport.Card(t, "security.json"), Options{}); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("no keys: %v", err)
	}
	wrong := k.Key
	wrong.Alg = jose.EdDSA
	if _, err := Sign(t.Context(), testsupport.Card(t, "security.json"), Options{Keys: []Key{wrong}}); err == nil {
		t.Fatal("signing a P-256 key as EdDSA must fail")
	}
}

// forge builds a card whose one signature has the given protected header,
// signed correctly by k over the card's spec canonical bytes.
func forge(t *testing.T, k testKey, header string, extra map[string]any) []byte {
	t.Helper()
	l, err := card.Load(testsupport.Card(t, "security.json"), card.Options{})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := card.Canonical(l.Value, card.ProfileSpec)
	if err != nil {
		t.Fatal(err)
	}
	prot := b64.EncodeToString([]byte(header))
	sig, err := jose.Sign(t.Context(), k.Signer, k.Alg, signingInput(prot, payload))
	if err != nil {
		t.Fatal(err)
	}
	entry := map[string]any{"protected": prot, "signature": b64.EncodeToString(sig)}
	for key, v := range extra {
		entry[key] = v
	}
	var c map[string]any
	if err := json.Unmarshal(l.Value.Compact(), &c); err != nil {
		t.Fatal(err)
	}
	c["signatures"] = []any{entry}
	out, _ := json.Marshal(c)
	return out
}

func TestVerifyHeaderRules(t *testing.T) {
	k := newKey(t, jose.ES256)
	ok := `{"alg":"ES256","kid":"` + k.KID + `","typ":"JOSE"}`
	tests := []struct {
		name, header string
		extra        map[string]any
		valid        bool
		reason       string
	}{
		{"well formed", ok, nil, true, ""},
		{"no typ is accepted", `{"alg":"ES256","kid":"` + k.KID + `"}`, nil, true, ""},
		{"crit", `{"alg":"ES256","crit":["exp"],"exp":1,"kid":"` + k.KID + `","typ":"JOSE"}`, nil, false, "crit"},
		{"b64 false", `{"alg":"ES256","b64":false,"kid":"` + k.KID + `","typ":"JOSE"}`, nil, false, "b64"},
		{"duplicate alg", `{"alg":"ES256","alg":"none","kid":"` + k.KID + `","typ":"JOSE"}`, nil, false, "duplicate"},
		{"alg none", `{"alg":"none","kid":"` + k.KID + `","typ":"JOSE"}`, nil, false, "none"},
		{"alg mismatch", `{"alg":"ES384","kid":"` + k.KID + `","typ":"JOSE"}`, nil, false, "ES384"},
		{"no kid", `{"alg":"ES256","typ":"JOSE"}`, nil, false, "no kid"},
		{"unknown kid", `{"alg":"ES256","kid":"someone-else","typ":"JOSE"}`, nil, false, "not in the trusted key set"},
		{"wrong typ", `{"alg":"ES256","kid":"` + k.KID + `","typ":"JWT"}`, nil, false, "typ"},
		{"kid not a string", `{"alg":"ES256","kid":7,"typ":"JOSE"}`, nil, false, "string"},
		{"header not JSON", `not json`, nil, false, "protected header"},
		{"overlapping unprotected header", ok, map[string]any{"header": map[string]any{"kid": "x"}}, false, "both protected and unprotected"},
		{"disjoint unprotected header", ok, map[string]any{"header": map[string]any{"note": "x"}}, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := forge(t, k, tc.header, tc.extra)
			v := mustVerify(t, data, VerifyOptions{Trusted: keySet(k)})
			c := v.Checks[0]
			if c.Valid != tc.valid || !strings.Contains(c.Reason, tc.reason) {
				t.Fatalf("valid=%v reason=%q; want valid=%v reason containing %q", c.Valid, c.Reason, tc.valid, tc.reason)
			}
		})
	}
}

func TestVerifyProfileRequirement(t *testing.T) {
	k := newKey(t, jose.ES256)
	res, err := Sign(t.Context(), testsupport.Card(t, "divergent.json"), Options{Keys: []Key{k.Key}, Mode: ModeSDK})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p     card.Profile
		valid bool
	}{{"", true}, {card.ProfileSDK, true}, {card.ProfileSpec, false}} {
		v := mustVerify(t, res.Card, VerifyOptions{Trusted: keySet(k), Profile: tc.p})
		if v.Valid(false) != tc.valid {
			t.Errorf("profile %q: valid=%v, want %v (%+v)", tc.p, v.Valid(false), tc.valid, v.Checks)
		}
	}
}

func TestVerifyUncoveredKeys(t *testing.T) {
	k := newKey(t, jose.ES256)
	res, err := Sign(t.Context(), testsupport.Card(t, "security.json"), Options{Keys: []Key{k.Key}})
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	_ = json.Unmarshal(res.Card, &c)
	c["extra"] = "added after signing"
	tampered, _ := json.Marshal(c)
	v := mustVerify(t, tampered, VerifyOptions{Trusted: keySet(k)})
	// The shipped SDKs ignore keys outside the schema, so the sdk profile
	// still verifies; the caller must be told the key is not covered.
	if !v.Valid(false) || v.Checks[0].Profile != card.ProfileSDK {
		t.Fatalf("checks %+v", v.Checks)
	}
	if u := v.Uncovered(); len(u) != 1 || u[0] != "extra" {
		t.Fatalf("Uncovered = %v, want [extra]", u)
	}
}

func TestJKUAllowed(t *testing.T) {
	tests := []struct {
		jku     string
		allowed []string
		want    bool
	}{
		{"https://keys.example.com/jwks.json", []string{"https://keys.example.com/"}, true},
		{"https://keys.example.com/jwks.json", []string{"https://keys.example.com"}, true},
		{"https://keys.example.com.evil.org/jwks.json", []string{"https://keys.example.com"}, false},
		{"https://keys.example.com/jwks.json", nil, false},
		{"https://keys.example.com/jwks.json", []string{""}, false},
		{"file:///etc/jwks.json", []string{"file:"}, false},
	}
	for _, tc := range tests {
		if got := jkuAllowed(tc.jku, tc.allowed); got != tc.want {
			t.Errorf("jkuAllowed(%q, %q) = %v, want %v", tc.jku, tc.allowed, got, tc.want)
		}
	}
}

// A card stripped of the values only the spec profile keeps must not pass
// as spec-valid on the strength of its sdk-profile signature.
func TestVerifySDKSignatureIsNeverSpecValid(t *testing.T) {
	k := newKey(t, jose.ES256)
	res, err := Sign(t.Context(), testsupport.Card(t, "divergent.json"), Options{Keys: []Key{k.Key}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Signatures) != 3 || res.Signatures[1].Profile != card.ProfileSDK {
		t.Fatalf("signatures %+v", res.Signatures)
	}
	raw, _ := b64.DecodeString(res.Signatures[1].Protected)
	if !strings.Contains(string(raw), `"`+ProfileHeader+`":"sdk"`) {
		t.Fatalf("sdk signature header %s lacks %s", raw, ProfileHeader)
	}
	var c map[string]any
	if err := json.Unmarshal(res.Card, &c); err != nil {
		t.Fatal(err)
	}
	// Drop the mTLS scheme and requirement, the empty icon and params, and
	// the spec signature: what is left is exactly the sdk projection.
	delete(c, "securitySchemes")
	delete(c, "securityRequirements")
	delete(c, "iconUrl")
	ext := c["capabilities"].(map[string]any)["extensions"].([]any)[0].(map[string]any)
	ext["params"] = map[string]any{"n": 1}
	c["signatures"] = c["signatures"].([]any)[1:]
	stripped, _ := json.Marshal(c)

	v := mustVerify(t, stripped, VerifyOptions{Trusted: keySet(k)})
	if !v.Valid(false) || v.Checks[0].Profile != card.ProfileSDK {
		t.Fatalf("want valid under the sdk profile only, got %+v", v.Checks)
	}
	v = mustVerify(t, stripped, VerifyOptions{Trusted: keySet(k), Profile: card.ProfileSpec})
	if v.Valid(false) || !strings.Contains(v.Checks[0].Reason, "covers the sdk profile") {
		t.Fatalf("requiring spec must refuse an sdk signature: %+v", v.Checks)
	}
	if _, err := Verify(t.Context(), stripped, VerifyOptions{Trusted: keySet(k), Profile: "strict"}); err == nil {
		t.Fatal("an unknown profile option must be an error, not an empty payload")
	}
}

func TestSignChecksStoredPublicKey(t *testing.T) {
	k, other := newKey(t, jose.ES256), newKey(t, jose.ES256)
	k.Public = other.Signer.Public()
	if _, err := Sign(t.Context(), testsupport.Card(t, "security.json"), Options{Keys: []Key{k.Key}}); err == nil || !strings.Contains(err.Error(), "not the one on record") {
		t.Fatalf("a signer whose key differs from the record must be refused: %v", err)
	}
	k.Public = k.Signer.Public()
	if _, err := Sign(t.Context(), testsupport.Card(t, "security.json"), Options{Keys: []Key{k.Key}}); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyRevokedKey(t *testing.T) {
	k := newKey(t, jose.ES256)
	res, err := Sign(t.Context(), testsupport.Card(t, "security.json"), Options{Keys: []Key{k.Key}})
	if err != nil {
		t.Fatal(err)
	}
	revoked := func(kid string) (string, bool) {
		return "revoked at 2026-11-21T00:00:00Z (key compromise)", kid == k.KID
	}
	v := mustVerify(t, res.Card, VerifyOptions{Trusted: keySet(k), Revoked: revoked})
	if v.Valid(false) || !v.Checks[0].Revoked || !strings.Contains(v.Checks[0].Reason, "revoked") {
		t.Fatalf("a signature by a revoked key must fail as revoked: %+v", v.Checks)
	}
	// Issue 24 item 19: the portability report names the revoked key, not
	// "no signature over spec bytes".
	want := "signed by a revoked key (kid " + Printable(k.KID) + ", revoked at 2026-11-21T00:00:00Z (key compromise))"
	for _, row := range v.Portability() {
		if row.Reason == ReasonJSResolverBug {
			continue // security.json has schemes: that path fails whatever the key (item 21)
		}
		if row.Covered || row.Reason != want {
			t.Errorf("portability %s: covered %v, reason %q, want %q", row.Verifier, row.Covered, row.Reason, want)
		}
	}
	if got := v.Checks[0].RevokedReason(); got != want {
		t.Errorf("RevokedReason() = %q, want %q", got, want)
	}
	// A signature that fails for another reason keeps its own.
	v = mustVerify(t, res.Card, VerifyOptions{Trusted: keySet(newKey(t, jose.ES256))})
	for _, row := range v.Portability() {
		if row.Reason == ReasonJSResolverBug {
			continue
		}
		if row.Covered || !strings.HasPrefix(row.Reason, "no signature over ") || v.Checks[0].RevokedReason() != "" {
			t.Errorf("portability %s with an unknown key: covered %v, reason %q", row.Verifier, row.Covered, row.Reason)
		}
	}
}

// countingSigner counts signatures.
type countingSigner struct {
	crypto.Signer
	n int
}

func (c *countingSigner) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	c.n++
	return c.Signer.Sign(r, d, o)
}

// TestPrepareSignsNothing: Prepare reads, lints and hashes a card without a
// key, so a caller decides on it (the daemon's policy) before any signature;
// the Prepared then signs with the identity Prepare reported.
func TestPrepareSignsNothing(t *testing.T) {
	k := newKey(t, jose.ES256)
	cs := &countingSigner{Signer: k.Signer}
	key := k.Key
	key.Signer = cs
	data := testsupport.Card(t, "security.json")
	p, err := Prepare(data, PrepareOptions{})
	if err != nil || cs.n != 0 {
		t.Fatalf("Prepare: err %v, %d signatures made", err, cs.n)
	}
	if name, _ := p.Loaded.Value.Get("name"); name.Str != "Secure Agent" {
		t.Fatalf("prepared card name %q", name.Str)
	}
	res, err := p.Sign(t.Context(), []Key{key}, "")
	if err != nil || cs.n != 1 {
		t.Fatalf("Sign: %v, %d signatures", err, cs.n)
	}
	if res.CanonicalSHA256 != p.CanonicalSHA256 {
		t.Fatal("the result's canonical hash differs from the prepared one")
	}
	whole, err := Sign(t.Context(), data, Options{Keys: []Key{k.Key}})
	if err != nil || whole.CanonicalSHA256 != p.CanonicalSHA256 || len(whole.Signatures) != len(res.Signatures) {
		t.Fatalf("Sign in one step differs from Prepare then Sign: %v", err)
	}
	if _, err := p.Sign(t.Context(), nil, ""); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("no keys: %v, want ErrNoKeys", err)
	}
}

// TestPrepareRefusesBadCards: a malformed card is a *strictjson.Error and a card
// with lint errors a *card.LintError, with no key involved.
func TestPrepareRefusesBadCards(t *testing.T) {
	var ce *strictjson.Error
	if _, err := Prepare([]byte(`{"name":`), PrepareOptions{}); !errors.As(err, &ce) {
		t.Fatalf("malformed card: %T %v, want *strictjson.Error", err, err)
	}
	var le *card.LintError
	if _, err := Prepare([]byte(`{"name":"x"}`), PrepareOptions{}); !errors.As(err, &le) {
		t.Fatalf("card missing required members: %T %v, want *card.LintError", err, err)
	}
}

// TestPreparedSignsAgainWithKeptSignatures: signing one Prepared twice (the
// daemon's retry after a revocation) keeps the card's old signatures once
// in each result, not once per call.
func TestPreparedSignsAgainWithKeptSignatures(t *testing.T) {
	k := newKey(t, jose.ES256)
	signed, err := Sign(t.Context(), testsupport.Card(t, "security.json"), Options{Keys: []Key{k.Key}, Mode: ModeSpec})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Prepare(signed.Card, PrepareOptions{Mode: ModeSpec, KeepSignatures: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res, err := p.Sign(t.Context(), []Key{k.Key}, "")
		if err != nil {
			t.Fatal(err)
		}
		l, err := card.Load(res.Card, card.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if sigs, _ := l.Value.Get("signatures"); len(sigs.Arr) != 2 {
			t.Fatalf("%d signatures in the card, want the old one and the new one", len(sigs.Arr))
		}
	}
}

func TestKeyJWK(t *testing.T) {
	k := newKey(t, jose.ES256).Key
	k.KID = "kid-1"
	j, err := k.JWK()
	if err != nil || j.Kid != "kid-1" || j.Alg != "ES256" || j.Kty != "EC" {
		t.Errorf("JWK = %+v, %v", j, err)
	}
	k.Alg = jose.RS256
	if _, err := k.JWK(); err == nil {
		t.Error("JWK with a mismatched alg succeeded")
	}
}
