package oidc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/oidctest"
)

// FuzzVerify feeds arbitrary strings to Verify. The verifier's keys are
// fetched once before fuzzing; with a fixed clock and an hour-long refresh
// interval no input can make it fetch again, so the fuzzer runs the parse,
// signature and claim paths without network, and seeds derived from real
// tokens reach past the signature check. Verify must never panic and must
// return either a token or an *Error.
func FuzzVerify(f *testing.F) {
	clock := oidctest.NewClock(time.Now().Truncate(time.Second))
	is := oidctest.New(f, oidctest.WithClock(clock.Now))
	cfg := Config{
		Issuers: []IssuerConfig{{Issuer: is.URL, Audience: audience, SubjectClaim: "kubernetes.io.serviceaccount.name", Algorithms: []string{"RS256", "ES256", "PS256", "EdDSA"}}},
		Rules:   []RoleRule{{Issuer: is.URL, Claims: map[string]string{"kubernetes.io.namespace": "r*"}, Roles: []string{"signer"}}},
	}
	v, err := New(context.Background(), cfg, Options{HTTPClient: is.Client, Now: clock.Now, MinRefreshInterval: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	if err := v.Prefetch(context.Background()); err != nil {
		f.Fatal(err)
	}
	seeds := []string{
		is.Mint(oidctest.KubernetesClaims(audience, "release", "sa")),
		is.Mint(oidctest.GitHubClaims(audience)),
		is.Mint(oidctest.KubernetesClaims(audience, "release", "sa"), oidctest.WithRawHeader(`{"alg":"RS256","alg":"RS256"}`)),
		is.Mint(nil, oidctest.WithRawPayload(`{"iss":"`+is.URL+`","exp":1e400,"aud":[1,{}],"kubernetes.io":{"serviceaccount":{"name":[]}}}`)),
		is.Mint(nil, oidctest.WithNoSignature()),
		is.Mint(nil, oidctest.WithHMAC(is.SigningKey().PublicPEM())),
		"eyJ.eyJ.", "a.b.c.d.e", "...", "", "eyJhbGciOiJSUzI1NiJ9.e30.",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		before := is.DiscoveryFetches() + is.JWKSFetches()
		tok, err := v.Verify(context.Background(), raw)
		if (tok == nil) == (err == nil) {
			t.Fatalf("token %v and error %v", tok, err)
		}
		if err != nil {
			if reason := reasonOf(t, err); reason == "" || strings.ContainsAny(reason, " \n") {
				t.Fatalf("reason %q", reason)
			}
		}
		if is.DiscoveryFetches()+is.JWKSFetches() != before {
			t.Fatal("Verify went to the network")
		}
		_ = LooksLikeJWT(raw)
	})
}
