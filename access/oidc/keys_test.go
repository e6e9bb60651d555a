package oidc

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/oidctest"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// warnings returns the WARN lines logged so far.
func warnings(logs *testsupport.SyncBuffer) []string {
	var out []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") {
			out = append(out, line)
		}
	}
	return out
}

// junkKeys are n JWKS entries no verifier may use: symmetric keys and keys
// of no known type, one with a kid that would break a log line.
func junkKeys(n int) []any {
	out := make([]any, n)
	for i := range out {
		if i%2 == 0 {
			out[i] = map[string]any{"kty": "oct", "k": "c2VjcmV0", "kid": fmt.Sprintf("sym-%d", i)}
		} else {
			out[i] = map[string]any{"kty": "bogus", "kid": fmt.Sprintf("bogus-%d\n\x1b[2J", i)}
		}
	}
	return out
}

// TestJWKSUnusableKeysOneWarning: an issuer JWKS full of unusable keys
// costs one WARN line per fetch, which names a few and counts the rest
// (it was one line per key: 12,004 lines per fetch, and anyone can cause
// a fetch every MinRefreshInterval with a made-up kid).
func TestJWKSUnusableKeysOneWarning(t *testing.T) {
	clock := oidctest.NewClock(time.Now().Truncate(time.Second))
	is := oidctest.New(t, oidctest.WithClock(clock.Now))
	is.PublishRaw(junkKeys(MaxJWKSKeys - 1)...)
	logs := &testsupport.SyncBuffer{}
	v, err := New(t.Context(), Config{Issuers: []IssuerConfig{{Issuer: is.URL, Audience: audience}}},
		Options{HTTPClient: is.Client, Now: clock.Now, MinRefreshInterval: time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(t.Context(), is.Mint(oidctest.GitHubClaims(audience))); err != nil {
		t.Fatalf("a token signed by the one good key: %v", err)
	}
	w := warnings(logs)
	if len(w) != 1 {
		t.Fatalf("%d WARN lines for one fetch, want 1:\n%s", len(w), strings.Join(w, "\n"))
	}
	for _, want := range []string{fmt.Sprintf("ignored=%d", MaxJWKSKeys-1), fmt.Sprintf("keys=%d", MaxJWKSKeys), "keys[1]", fmt.Sprintf("%d more", MaxJWKSKeys-1-maxIgnoredKeysNamed)} {
		if !strings.Contains(w[0], want) {
			t.Errorf("warning %s\nwant it to hold %q", w[0], want)
		}
	}
	// A made-up kid after the refresh interval: one more fetch, one more line.
	clock.Advance(time.Minute + time.Second)
	if _, err := v.Verify(t.Context(), is.Mint(oidctest.GitHubClaims(audience), oidctest.WithHeader("kid", "made-up"))); reasonOf(t, err) != ReasonUnknownKID {
		t.Fatalf("made-up kid: %v", err)
	}
	if w := warnings(logs); len(w) != 2 {
		t.Fatalf("%d WARN lines after two fetches, want 2:\n%s", len(w), strings.Join(w, "\n"))
	}
}

// TestJWKSKeyCap: a JWKS listing more than MaxJWKSKeys entries is refused
// whole, saying why, and the keys fetched before stay in use.
func TestJWKSKeyCap(t *testing.T) {
	clock := oidctest.NewClock(time.Now().Truncate(time.Second))
	newVerifier := func(is *oidctest.Issuer) (*Verifier, *testsupport.SyncBuffer) {
		logs := &testsupport.SyncBuffer{}
		v, err := New(t.Context(), Config{Issuers: []IssuerConfig{{Issuer: is.URL, Audience: audience}}},
			Options{HTTPClient: is.Client, Now: clock.Now, MinRefreshInterval: time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return v, logs
	}
	tooMany := fmt.Sprintf("lists %d keys, more than the %d", MaxJWKSKeys+1, MaxJWKSKeys)

	t.Run("first fetch", func(t *testing.T) {
		is := oidctest.New(t, oidctest.WithClock(clock.Now))
		is.PublishRaw(junkKeys(MaxJWKSKeys)...)
		v, logs := newVerifier(is)
		_, err := v.Verify(t.Context(), is.Mint(oidctest.GitHubClaims(audience)))
		if reasonOf(t, err) != ReasonIssuerUnavailable || !strings.Contains(err.Error(), tooMany) {
			t.Fatalf("JWKS of %d keys: %v, want issuer_unavailable saying %q", MaxJWKSKeys+1, err, tooMany)
		}
		if w := warnings(logs); len(w) != 1 || !strings.Contains(w[0], tooMany) {
			t.Fatalf("want one WARN line saying %q:\n%s", tooMany, strings.Join(w, "\n"))
		}
	})

	t.Run("keys fetched before stay", func(t *testing.T) {
		is := oidctest.New(t, oidctest.WithClock(clock.Now))
		v, _ := newVerifier(is)
		tok := is.Mint(oidctest.GitHubClaims(audience))
		if _, err := v.Verify(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
		is.PublishRaw(junkKeys(MaxJWKSKeys)...)
		clock.Advance(2 * DefaultKeyMaxAge)
		tok = is.Mint(oidctest.GitHubClaims(audience))
		if _, err := v.Verify(t.Context(), tok); err != nil {
			t.Fatalf("a token by a known key once the JWKS grew too long: %v", err)
		}
		if n := is.JWKSFetches(); n != 2 {
			t.Fatalf("%d JWKS fetches, want 2 (the second refused)", n)
		}
	})
}
