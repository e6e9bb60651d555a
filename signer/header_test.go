package signer

import (
	"testing"

	"github.com/cardsign/cardsign/card"
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
