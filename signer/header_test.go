package signer

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

// TestHeaderCache: a cached header is the same text as a freshly built one,
// for every jku and profile, and each is built once.
func TestHeaderCache(t *testing.T) {
	var c HeaderCache
	for range 2 {
		for _, jku := range []string{"", "https://keys.example.com/jwks.json"} {
			for _, p := range []card.Profile{card.ProfileSpec, card.ProfileSDK, card.ProfilePythonASCII} {
				want := b64.EncodeToString(protectedHeader(jose.ES256, "k1", jku, p))
				if got := c.protected(jose.ES256, "k1", jku, p); got != want {
					t.Fatalf("cached header for jku %q profile %s = %s, want %s", jku, p, got, want)
				}
				var nilCache *HeaderCache
				if got := nilCache.protected(jose.ES256, "k1", jku, p); got != want {
					t.Fatalf("nil cache: %s, want %s", got, want)
				}
			}
		}
	}
	// Another kid through the same cache gets its own header.
	if got, want := c.protected(jose.ES256, "k2", "", card.ProfileSpec), b64.EncodeToString(protectedHeader(jose.ES256, "k2", "", card.ProfileSpec)); got != want {
		t.Fatalf("k2 through k1's cache: %s, want %s", got, want)
	}
	n := 0
	c.m.Range(func(any, any) bool { n++; return true })
	if n != 7 {
		t.Fatalf("%d cached headers, want 7 (2 jku × 3 profiles + k2)", n)
	}
}

// TestSignatureLifetime: with a lifetime, every signature's protected header
// carries iat and exp; a verifier refuses it past exp (beyond the clock skew)
// or before iat, and says so.
func TestSignatureLifetime(t *testing.T) {
	k := newKey(t, jose.ES256)
	signedAt := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	p, err := Prepare(testsupport.Card(t, "security.json"), PrepareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.SignWith(t.Context(), []Key{k.Key}, SignOptions{Lifetime: time.Hour, Now: signedAt})
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := b64.DecodeString(res.Signatures[0].Protected)
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(hdr, &h); err != nil {
		t.Fatal(err)
	}
	if h["iat"] != float64(signedAt.Unix()) || h["exp"] != float64(signedAt.Add(time.Hour).Unix()) {
		t.Fatalf("protected header %s: want iat %d and exp %d", hdr, signedAt.Unix(), signedAt.Add(time.Hour).Unix())
	}
	if !strings.HasPrefix(string(hdr), `{"alg":"ES256","exp":`) {
		t.Fatalf("protected header %s: members not in sorted order", hdr)
	}
	for _, tc := range []struct {
		name  string
		at    time.Time
		skew  time.Duration
		valid bool
		why   string
	}{
		{"within its life", signedAt.Add(30 * time.Minute), 0, true, ""},
		{"just past exp, within the default skew", signedAt.Add(time.Hour + 30*time.Second), 0, true, ""},
		{"past exp", signedAt.Add(2 * time.Hour), 0, false, "signature expired at 2026-11-23T13:00:00Z"},
		{"past exp, no skew", signedAt.Add(time.Hour + time.Second), -1, false, "expired"},
		{"before iat", signedAt.Add(-time.Hour), 0, false, "issued in the future"},
	} {
		v := mustVerify(t, res.Card, VerifyOptions{Trusted: keySet(k), Now: func() time.Time { return tc.at }, ClockSkew: tc.skew})
		if v.Valid(true) != tc.valid {
			t.Errorf("%s: valid = %v, want %v (%+v)", tc.name, v.Valid(true), tc.valid, v.Checks)
		}
		if !tc.valid && !strings.Contains(v.Checks[0].Reason, tc.why) {
			t.Errorf("%s: reason %q, want it to say %q", tc.name, v.Checks[0].Reason, tc.why)
		}
	}
	// Without a lifetime, no iat or exp, and the header is the cached one.
	plain, err := p.Sign(t.Context(), []Key{k.Key}, "")
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := b64.DecodeString(plain.Signatures[0].Protected); strings.Contains(string(h), "exp") {
		t.Fatalf("a signature without a lifetime has %s", h)
	}
}
