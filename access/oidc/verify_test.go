package oidc

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/oidctest"
)

const audience = "https://cardsign.example"

// fixture is a verifier trusting one oidctest issuer (RS256, reached through
// Options.HTTPClient) and a second one (ES256, a "private Kubernetes issuer"
// reached through its CAFile), with a fake clock shared by all three.
type fixture struct {
	clock  *oidctest.Clock
	gh     *oidctest.Issuer // GitHub- and GitLab-shaped tokens
	k8s    *oidctest.Issuer
	v      *Verifier
	cfg    Config
	minRef time.Duration
}

func baseConfig(gh, k8s *oidctest.Issuer) Config {
	return Config{
		Issuers: []IssuerConfig{
			{Issuer: gh.URL, Audience: audience},
			{Issuer: k8s.URL, Audience: audience, Algorithms: []string{"ES256"}, CAFile: k8s.CAFile},
		},
		Rules: []RoleRule{
			{Issuer: gh.URL, Claims: map[string]string{"repository": "acme/*", "ref": "refs/tags/v*"}, Roles: []string{"signer"}},
			{Issuer: gh.URL, Claims: map[string]string{"repository_owner": "acme", "environment": "production"}, Roles: []string{"signer", "auditor"}},
			{Issuer: gh.URL, Claims: map[string]string{"project_path": "acme/*", "ref_type": "tag"}, Roles: []string{"signer"}},
			{Issuer: k8s.URL, Claims: map[string]string{"kubernetes.io.namespace": "release", "kubernetes.io.serviceaccount.name": "cardsign-*"}, Roles: []string{"admin"}},
		},
	}
}

func newFixture(t testing.TB, mutate func(*Config)) *fixture {
	t.Helper()
	clock := oidctest.NewClock(time.Now().Truncate(time.Second))
	f := &fixture{clock: clock, minRef: time.Minute}
	f.gh = oidctest.New(t, oidctest.WithClock(clock.Now))
	f.k8s = oidctest.New(t, oidctest.WithAlgorithm("ES256"), oidctest.WithClock(clock.Now))
	f.cfg = baseConfig(f.gh, f.k8s)
	if mutate != nil {
		mutate(&f.cfg)
	}
	v, err := New(t.Context(), f.cfg, Options{
		HTTPClient:         f.gh.Client, // trusts only gh's CA: k8s must go through its CAFile
		Now:                clock.Now,
		MinRefreshInterval: f.minRef,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.v = v
	return f
}

// reasonOf returns err's Reason, failing the test unless err is an *Error
// matching ErrInvalidToken.
func reasonOf(t *testing.T, err error) string {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("error %v (%T) is not an *Error matching ErrInvalidToken", err, err)
	}
	return e.Reason
}

func TestVerifyPlatforms(t *testing.T) {
	f := newFixture(t, nil)
	ghMain := oidctest.GitHubClaims(audience)
	ghMain["ref"], ghMain["environment"], ghMain["sub"] = "refs/heads/main", "staging", "repo:acme/payments:ref:refs/heads/main"
	ghOther := oidctest.GitHubClaims(audience)
	ghOther["repository"], ghOther["repository_owner"], ghOther["sub"] = "evil/payments", "evil", "repo:evil/payments:ref:refs/tags/v1.2.0"
	glBranch := oidctest.GitLabClaims(audience)
	glBranch["ref_type"], glBranch["ref"] = "branch", "main"

	tests := []struct {
		name      string
		issuer    *oidctest.Issuer
		claims    map[string]any
		subject   string
		roles     []string
		claimsHas map[string]string
		prov      map[string]string
	}{
		{
			name: "github tag in production", issuer: f.gh, claims: oidctest.GitHubClaims(audience),
			subject: "repo:acme/payments:ref:refs/tags/v1.2.0", roles: []string{"auditor", "signer"},
			claimsHas: map[string]string{"repository": "acme/payments", "aud": audience, "run_id": "9876543210", "head_ref": ""},
			prov: map[string]string{
				"iss": f.gh.URL, "sub": "repo:acme/payments:ref:refs/tags/v1.2.0",
				"repository": "acme/payments", "ref": "refs/tags/v1.2.0", "sha": "2f1c0b7e4d3a59e8c6b1a0f9e8d7c6b5a4938271",
				"workflow": "release", "workflow_ref": "acme/payments/.github/workflows/release.yml@refs/tags/v1.2.0",
				"job_workflow_ref": "acme/payments/.github/workflows/release.yml@refs/tags/v1.2.0",
				"run_id":           "9876543210", "run_attempt": "1", "environment": "production", "actor": "octocat", "event_name": "push",
				"ref_type": "tag", // shared with GitLab's list
			},
		},
		{name: "github branch in staging", issuer: f.gh, claims: ghMain, subject: "repo:acme/payments:ref:refs/heads/main", roles: nil},
		{name: "github other owner", issuer: f.gh, claims: ghOther, subject: "repo:evil/payments:ref:refs/tags/v1.2.0", roles: nil},
		{
			name: "gitlab tag", issuer: f.gh, claims: oidctest.GitLabClaims(audience),
			subject: "project_path:acme/payments:ref_type:tag:ref:v1.2.0", roles: []string{"signer"},
			claimsHas: map[string]string{"runner_id": "1", "ref_protected": "true", "project_path": "acme/payments"},
			prov: map[string]string{
				"iss": f.gh.URL, "sub": "project_path:acme/payments:ref_type:tag:ref:v1.2.0",
				"project_path": "acme/payments", "namespace_path": "acme", "ref": "v1.2.0", "ref_type": "tag",
				"sha": "2f1c0b7e4d3a59e8c6b1a0f9e8d7c6b5a4938271", "pipeline_id": "574", "job_id": "302",
				"environment": "production", "user_login": "alice",
				"ci_config_ref_uri": "gitlab.example.com/acme/payments//.gitlab-ci.yml@refs/tags/v1.2.0",
			},
		},
		{name: "gitlab branch", issuer: f.gh, claims: glBranch, subject: "project_path:acme/payments:ref_type:tag:ref:v1.2.0", roles: nil},
		{
			name: "kubernetes service account", issuer: f.k8s, claims: oidctest.KubernetesClaims(audience, "release", "cardsign-release"),
			subject: "system:serviceaccount:release:cardsign-release", roles: []string{"admin"},
			claimsHas: map[string]string{
				"kubernetes.io.namespace": "release", "kubernetes.io.serviceaccount.uid": "9e8d7c6b-5a49-3827-1605-f4e3d2c1b0a9",
				"kubernetes.io.pod.name": "release-7f9c4d-abcde", "kubernetes.io.warnafter": "1700000000",
			},
			prov: map[string]string{
				"iss": f.k8s.URL, "sub": "system:serviceaccount:release:cardsign-release",
				"kubernetes.io.namespace": "release", "kubernetes.io.serviceaccount.name": "cardsign-release",
				"kubernetes.io.pod.name": "release-7f9c4d-abcde",
			},
		},
		{name: "kubernetes other namespace", issuer: f.k8s, claims: oidctest.KubernetesClaims(audience, "default", "cardsign-release"), subject: "system:serviceaccount:default:cardsign-release"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := f.v.Verify(t.Context(), tt.issuer.Mint(tt.claims))
			if err != nil {
				t.Fatal(err)
			}
			if tok.Issuer != tt.issuer.URL || tok.Subject != tt.subject {
				t.Errorf("issuer %q subject %q", tok.Issuer, tok.Subject)
			}
			if !slices.Equal(tok.Roles, tt.roles) {
				t.Errorf("roles %v, want %v", tok.Roles, tt.roles)
			}
			if want := f.clock.Now().Add(5 * time.Minute); !tok.Expiry.Equal(want) {
				t.Errorf("expiry %v, want %v", tok.Expiry, want)
			}
			for k, want := range tt.claimsHas {
				if got, ok := tok.Claims[k]; !ok || got != want {
					t.Errorf("Claims[%q] = %q, %v; want %q", k, got, ok, want)
				}
			}
			if _, ok := tok.Claims["user_identities"]; ok {
				t.Error("an array claim was flattened")
			}
			if tt.prov != nil {
				if got := tok.Provenance(); !maps.Equal(got, tt.prov) {
					t.Errorf("Provenance:\n got %v\nwant %v", got, tt.prov)
				}
			}
		})
	}
	// One discovery and one JWKS fetch per issuer for all those tokens.
	for _, is := range []*oidctest.Issuer{f.gh, f.k8s} {
		if is.DiscoveryFetches() != 1 || is.JWKSFetches() != 1 {
			t.Errorf("%s: %d discovery and %d JWKS fetches, want 1 and 1", is.URL, is.DiscoveryFetches(), is.JWKSFetches())
		}
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestVerifyRefusals(t *testing.T) {
	f := newFixture(t, nil)
	gh := func(over map[string]any) map[string]any {
		c := oidctest.GitHubClaims(audience)
		maps.Copy(c, over) // a nil value stays: Mint leaves that claim out
		return c
	}
	now := f.clock.Now()
	good := f.gh.Mint(gh(nil))
	goodSegs := strings.Split(good, ".")
	stranger := oidctest.New(t, oidctest.WithClock(f.clock.Now))
	unpublished := f.gh.NewKey("RS256")
	esKey := f.gh.NewKey("ES256")
	f.gh.Publish(esKey)
	ghTamper := f.gh.Mint(gh(map[string]any{"repository": "evil/payments"}))

	nested := `{"a":` + strings.Repeat(`{"a":`, 20) + `1` + strings.Repeat(`}`, 21)
	tests := []struct {
		name   string
		token  string
		reason string
	}{
		{"empty", "", ReasonMalformed},
		{"two segments", goodSegs[0] + "." + goodSegs[1], ReasonMalformed},
		{"four segments", good + ".x", ReasonMalformed},
		{"jwe", "eyJhbGciOiJSU0EtT0FFUCIsImVuYyI6IkEyNTZHQ00ifQ.a.b.c.d", ReasonJWE},
		{"1 MB", "eyJ" + strings.Repeat("A", 1<<20) + ".e30.", ReasonTooLarge},
		{"bad base64 header", "eyJ!!!." + goodSegs[1] + "." + goodSegs[2], ReasonMalformed},
		{"padded header", goodSegs[0] + "=." + goodSegs[1] + "." + goodSegs[2], ReasonMalformed},
		{"bad base64 claims", goodSegs[0] + ".e30+." + goodSegs[2], ReasonMalformed},
		{"bad base64 signature", goodSegs[0] + "." + goodSegs[1] + ".a/b", ReasonMalformed},
		{"header not json", b64("alg RS256") + "." + goodSegs[1] + "." + goodSegs[2], ReasonMalformed},
		{"header an array", b64(`["RS256"]`) + "." + goodSegs[1] + "." + goodSegs[2], ReasonMalformed},
		{"header trailing data", b64(`{"alg":"RS256"} {}`) + "." + goodSegs[1] + "." + goodSegs[2], ReasonMalformed},
		{"kid not a string", f.gh.Mint(gh(nil), oidctest.WithHeader("kid", 7)), ReasonMalformed},
		{"duplicate alg in header", f.gh.Mint(gh(nil), oidctest.WithRawHeader(`{"alg":"RS256","kid":"`+f.gh.SigningKey().KID+`","alg":"RS256"}`)), ReasonDuplicateKey},
		{"alg and ALG in header", f.gh.Mint(gh(nil), oidctest.WithRawHeader(`{"alg":"RS256","ALG":"none","kid":"`+f.gh.SigningKey().KID+`"}`)), ReasonDuplicateKey},
		{"duplicate claim", f.gh.Mint(nil, oidctest.WithRawPayload(`{"iss":"`+f.gh.URL+`","sub":"a","sub":"b"}`)), ReasonDuplicateKey},
		{"claims nested too deep", f.gh.Mint(nil, oidctest.WithRawPayload(nested)), ReasonMalformed},
		{"flattened names collide", f.k8s.Mint(map[string]any{
			"aud": audience, "sub": "system:serviceaccount:release:x",
			"kubernetes.io.namespace": "release", "kubernetes.io": map[string]any{"namespace": "default"},
		}), ReasonDuplicateKey},
		{"crit", f.gh.Mint(gh(nil), oidctest.WithHeader("crit", []string{"exp"})), ReasonCrit},
		{"no alg", f.gh.Mint(gh(nil), oidctest.WithHeader("alg", nil)), ReasonAlg},
		{"alg none", f.gh.Mint(gh(nil), oidctest.WithNoSignature()), ReasonAlg},
		{"HS256 with the public key as secret", f.gh.Mint(gh(nil), oidctest.WithHMAC(f.gh.SigningKey().PublicPEM())), ReasonAlg},
		{"HS256 with kid and the public key", f.gh.Mint(gh(nil), oidctest.WithHMAC(f.gh.SigningKey().PublicPEM()), oidctest.WithHeader("kid", f.gh.SigningKey().KID)), ReasonAlg},
		{"RS256 from the ES256-only issuer", f.k8s.Mint(oidctest.KubernetesClaims(audience, "release", "x"), oidctest.WithKey(unpublished)), ReasonAlg},
		{"header alg differs from the key's", f.gh.Mint(gh(nil), oidctest.WithKey(esKey), oidctest.WithHeader("alg", "RS256")), ReasonAlg},
		{"no iss", f.gh.Mint(gh(map[string]any{"iss": nil})), ReasonIssuerClaim},
		{"iss a number", f.gh.Mint(gh(map[string]any{"iss": 1})), ReasonIssuerClaim},
		{"iss another URL", f.gh.Mint(gh(map[string]any{"iss": "https://token.actions.githubusercontent.com"})), ReasonUntrustedIssuer},
		{"iss with a trailing slash", f.gh.Mint(gh(map[string]any{"iss": f.gh.URL + "/"})), ReasonUntrustedIssuer},
		{"unconfigured issuer", stranger.Mint(gh(nil)), ReasonUntrustedIssuer},
		{"unknown kid", f.gh.Mint(gh(nil), oidctest.WithKey(unpublished)), ReasonUnknownKID},
		{"tampered claims", goodSegs[0] + "." + strings.Split(ghTamper, ".")[1] + "." + goodSegs[2], ReasonSignature},
		{"signature of another key with the right kid", f.gh.Mint(gh(nil), oidctest.WithKey(unpublished), oidctest.WithHeader("kid", f.gh.SigningKey().KID)), ReasonSignature},
		{"expired", f.gh.Mint(gh(map[string]any{"exp": now.Add(-time.Minute).Unix()})), ReasonExpired},
		{"no exp", f.gh.Mint(gh(map[string]any{"exp": nil})), ReasonExpired},
		{"exp a string", f.gh.Mint(gh(map[string]any{"exp": "tomorrow"})), ReasonMalformed},
		{"exp huge", f.gh.Mint(gh(map[string]any{"exp": 1e300})), ReasonMalformed},
		{"nbf in the future", f.gh.Mint(gh(map[string]any{"nbf": now.Add(time.Minute).Unix()})), ReasonNotYetValid},
		{"iat in the future", f.gh.Mint(gh(map[string]any{"iat": now.Add(time.Minute).Unix()})), ReasonNotYetValid},
		{"wrong aud", f.gh.Mint(gh(map[string]any{"aud": "https://github.com/acme"})), ReasonAudience},
		{"aud array without ours", f.gh.Mint(gh(map[string]any{"aud": []string{"a", "b"}})), ReasonAudience},
		{"no aud", f.gh.Mint(gh(map[string]any{"aud": nil})), ReasonAudience},
		{"aud an object", f.gh.Mint(gh(map[string]any{"aud": map[string]any{"x": audience}})), ReasonAudience},
		{"no sub", f.gh.Mint(gh(map[string]any{"sub": nil})), ReasonSubject},
		{"empty sub", f.gh.Mint(gh(map[string]any{"sub": ""})), ReasonSubject},
		{"sub a number", f.gh.Mint(gh(map[string]any{"sub": 42})), ReasonSubject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := f.v.Verify(t.Context(), tt.token)
			if err == nil {
				t.Fatalf("accepted: %+v", tok)
			}
			if got := reasonOf(t, err); got != tt.reason {
				t.Errorf("reason %q, want %q (%v)", got, tt.reason, err)
			}
			// No token content in the error: not the token, not its
			// segments, not attacker-chosen values.
			msg := err.Error()
			for _, s := range []string{"evil", "acme", "tomorrow", "token.actions"} {
				if strings.Contains(msg, s) {
					t.Errorf("error %q quotes the token (%q)", msg, s)
				}
			}
			if len(tt.token) > 20 && strings.Contains(msg, tt.token[:20]) {
				t.Errorf("error %q quotes the token", msg)
			}
		})
	}
	if stranger.DiscoveryFetches() != 0 || stranger.JWKSFetches() != 0 {
		t.Error("the verifier fetched an unconfigured issuer's keys")
	}
}

func TestIssuerRequirementsAndAlgorithms(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Issuers[0].Claims = map[string]string{"repository_owner": "acme", "event_name": "push"}
		c.Issuers[0].Algorithms = []string{"RS256"}
		c.Issuers[1].SubjectClaim = "kubernetes.io.serviceaccount.name"
	})
	ok := oidctest.GitHubClaims(audience)
	if _, err := f.v.Verify(t.Context(), f.gh.Mint(ok)); err != nil {
		t.Fatal(err)
	}
	pr := oidctest.GitHubClaims(audience)
	pr["event_name"] = "pull_request"
	if _, err := f.v.Verify(t.Context(), f.gh.Mint(pr)); reasonOf(t, err) != ReasonClaims {
		t.Errorf("pull_request: %v", err)
	}
	noOwner := oidctest.GitHubClaims(audience)
	delete(noOwner, "repository_owner")
	if _, err := f.v.Verify(t.Context(), f.gh.Mint(noOwner)); reasonOf(t, err) != ReasonClaims {
		t.Errorf("no repository_owner: %v", err)
	}
	es := f.gh.Rotate("ES256", false)
	if _, err := f.v.Verify(t.Context(), f.gh.Mint(ok, oidctest.WithKey(es))); reasonOf(t, err) != ReasonAlg {
		t.Errorf("ES256 from an RS256-only issuer: %v", err)
	}
	tok, err := f.v.Verify(t.Context(), f.k8s.Mint(oidctest.KubernetesClaims(audience, "release", "cardsign-x")))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Subject != "cardsign-x" || tok.Provenance()["sub"] != "system:serviceaccount:release:cardsign-x" {
		t.Errorf("subject %q, provenance %v", tok.Subject, tok.Provenance())
	}
}

func TestClockSkew(t *testing.T) {
	for _, tt := range []struct {
		name string
		skew time.Duration
		exp  time.Duration // relative to now
		nbf  time.Duration
		ok   bool
	}{
		{"expired 5s ago, default 10s skew", 0, -5 * time.Second, -time.Minute, true},
		{"expired 15s ago, default 10s skew", 0, -15 * time.Second, -time.Minute, false},
		{"expired 5s ago, 2s skew", 2 * time.Second, -5 * time.Second, -time.Minute, false},
		{"expired 5s ago, no skew", -1, -5 * time.Second, -time.Minute, false},
		{"expires now, no skew", -1, 0, -time.Minute, false},
		{"expires in 1s, no skew", -1, time.Second, -time.Minute, true},
		{"valid in 5s, default skew", 0, time.Minute, 5 * time.Second, true},
		{"valid in 5s, no skew", -1, time.Minute, 5 * time.Second, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.ClockSkew = tt.skew })
			now := f.clock.Now()
			c := oidctest.GitHubClaims(audience)
			c["exp"], c["nbf"], c["iat"] = now.Add(tt.exp).Unix(), now.Add(tt.nbf).Unix(), now.Add(tt.nbf).Unix()
			_, err := f.v.Verify(t.Context(), f.gh.Mint(c))
			if tt.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestKeyRotation(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	verify := func(raw string) error { _, err := f.v.Verify(ctx, raw); return err }
	claims := oidctest.GitHubClaims(audience)
	if err := verify(f.gh.Mint(claims)); err != nil {
		t.Fatal(err)
	}
	old := f.gh.SigningKey()
	f.gh.Rotate("ES256", false)
	f.clock.Advance(f.minRef)
	if err := verify(f.gh.Mint(claims)); err != nil {
		t.Fatalf("new kid after rotation: %v", err)
	}
	if n := f.gh.JWKSFetches(); n != 2 {
		t.Fatalf("%d JWKS fetches after one rotation, want 2", n)
	}
	if err := verify(f.gh.Mint(claims, oidctest.WithKey(old))); err != nil {
		t.Fatalf("old key still published: %v", err)
	}

	// A rotation right after a fetch is not seen until the interval has
	// passed: the rate limit holds even for a legitimate new key.
	f.gh.Rotate("", true)
	if err := verify(f.gh.Mint(claims)); reasonOf(t, err) != ReasonUnknownKID {
		t.Fatalf("new kid within the interval: %v", err)
	}
	f.clock.Advance(f.minRef)
	if err := verify(f.gh.Mint(claims)); err != nil {
		t.Fatalf("new kid after the interval: %v", err)
	}
	// The dropped key is forgotten once the JWKS without it is fetched.
	if err := verify(f.gh.Mint(claims, oidctest.WithKey(old))); reasonOf(t, err) != ReasonUnknownKID {
		t.Fatalf("dropped key: %v", err)
	}

	// A burst of tokens with unknown kids, concurrently: at most one fetch
	// per interval.
	f.clock.Advance(f.minRef)
	before := f.gh.JWKSFetches()
	var wg sync.WaitGroup
	errs := make([]error, 20)
	toks := make([]string, len(errs))
	for i := range toks {
		toks[i] = f.gh.Mint(claims, oidctest.WithKey(f.gh.NewKey("ES256")))
	}
	for i := range toks {
		wg.Go(func() { errs[i] = verify(toks[i]) })
	}
	wg.Wait()
	for _, err := range errs {
		if reasonOf(t, err) != ReasonUnknownKID {
			t.Fatalf("burst: %v", err)
		}
	}
	if n := f.gh.JWKSFetches() - before; n != 1 {
		t.Fatalf("burst of unknown kids: %d JWKS fetches, want 1", n)
	}
}

func TestCacheMaxAge(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	claims := oidctest.GitHubClaims(audience)
	f.gh.SetCacheMaxAge(300)
	if _, err := f.v.Verify(ctx, f.gh.Mint(claims)); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(299 * time.Second)
	if _, err := f.v.Verify(ctx, f.gh.Mint(claims)); err != nil || f.gh.JWKSFetches() != 1 {
		t.Fatalf("within max-age: %v, %d fetches", err, f.gh.JWKSFetches())
	}
	f.clock.Advance(2 * time.Second)
	if _, err := f.v.Verify(ctx, f.gh.Mint(claims)); err != nil || f.gh.JWKSFetches() != 2 {
		t.Fatalf("past max-age: %v, %d fetches", err, f.gh.JWKSFetches())
	}
	// Without the header the default (an hour) applies; discovery is kept
	// that long too.
	f.gh.SetCacheMaxAge(-1)
	f.clock.Advance(301 * time.Second)
	if _, err := f.v.Verify(ctx, f.gh.Mint(claims)); err != nil || f.gh.JWKSFetches() != 3 {
		t.Fatalf("refetch: %v, %d fetches", err, f.gh.JWKSFetches())
	}
	f.clock.Advance(DefaultKeyMaxAge - time.Second)
	if _, err := f.v.Verify(ctx, f.gh.Mint(claims)); err != nil || f.gh.JWKSFetches() != 3 {
		t.Fatalf("within the default: %v, %d fetches", err, f.gh.JWKSFetches())
	}
	f.clock.Advance(time.Second)
	if _, err := f.v.Verify(ctx, f.gh.Mint(claims)); err != nil || f.gh.JWKSFetches() != 4 {
		t.Fatalf("past the default: %v, %d fetches", err, f.gh.JWKSFetches())
	}
	if n := f.gh.DiscoveryFetches(); n != 2 {
		t.Fatalf("%d discovery fetches, want 2 (at start and after an hour)", n)
	}
}

func TestOutage(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	claims := oidctest.GitHubClaims(audience)
	if _, err := f.v.Verify(ctx, f.gh.Mint(claims)); err != nil {
		t.Fatal(err)
	}
	f.gh.SetDown(true)
	// Past the cache age, so the verifier tries to refresh, fails, and
	// keeps using the key it has.
	f.clock.Advance(2 * time.Hour)
	if _, err := f.v.Verify(ctx, f.gh.Mint(claims)); err != nil {
		t.Fatalf("cached key during an outage: %v", err)
	}
	fetches := f.gh.DiscoveryFetches() + f.gh.JWKSFetches()
	if _, err := f.v.Verify(ctx, f.gh.Mint(claims)); err != nil {
		t.Fatalf("cached key during an outage, again: %v", err)
	}
	if n := f.gh.DiscoveryFetches() + f.gh.JWKSFetches(); n != fetches {
		t.Fatalf("the outage is retried on every token (%d more requests)", n-fetches)
	}
	rotated := f.gh.Rotate("", false)
	for _, advance := range []time.Duration{0, f.minRef} {
		f.clock.Advance(advance)
		_, err := f.v.Verify(ctx, f.gh.Mint(claims))
		if reasonOf(t, err) != ReasonIssuerUnavailable {
			t.Fatalf("unknown kid during an outage: %v", err)
		}
		if !strings.Contains(err.Error(), "503") {
			t.Errorf("error %q does not say why the issuer is unavailable", err)
		}
	}
	f.gh.SetDown(false)
	f.clock.Advance(f.minRef)
	tok, err := f.v.Verify(ctx, f.gh.Mint(claims, oidctest.WithKey(rotated)))
	if err != nil {
		t.Fatalf("after the outage: %v", err)
	}
	if tok.Subject == "" {
		t.Fatal("no subject")
	}
}

func TestIssuerDownAtStart(t *testing.T) {
	clock := oidctest.NewClock(time.Now().Truncate(time.Second))
	gh := oidctest.New(t, oidctest.WithClock(clock.Now))
	k8s := oidctest.New(t, oidctest.WithAlgorithm("ES256"), oidctest.WithClock(clock.Now))
	gh.SetDown(true)
	ctx := t.Context()
	v, err := New(ctx, baseConfig(gh, k8s), Options{HTTPClient: gh.Client, Now: clock.Now, MinRefreshInterval: time.Second})
	if err != nil {
		t.Fatalf("New with an issuer down: %v", err)
	}
	if gh.DiscoveryFetches() != 0 {
		t.Fatal("New fetched")
	}
	if err := v.Prefetch(ctx); err == nil || !strings.Contains(err.Error(), gh.URL) || strings.Contains(err.Error(), k8s.URL) {
		t.Fatalf("Prefetch: %v", err)
	}
	claims := oidctest.GitHubClaims(audience)
	if _, err := v.Verify(ctx, gh.Mint(claims)); reasonOf(t, err) != ReasonIssuerUnavailable {
		t.Fatalf("issuer down: %v", err)
	}
	gh.SetDown(false)
	clock.Advance(time.Second)
	if _, err := v.Verify(ctx, gh.Mint(claims)); err != nil {
		t.Fatalf("issuer back: %v", err)
	}
	if _, err := v.Verify(ctx, k8s.Mint(oidctest.KubernetesClaims(audience, "release", "cardsign-a"))); err != nil {
		t.Fatalf("prefetched issuer: %v", err)
	}
	if k8s.JWKSFetches() != 1 {
		t.Fatalf("k8s: %d JWKS fetches, want 1 (by Prefetch)", k8s.JWKSFetches())
	}
}

// TestDiscoveryChecks: the discovery document must name the issuer exactly,
// and a client without the issuer's CA cannot fetch at all.
func TestDiscoveryChecks(t *testing.T) {
	clock := oidctest.NewClock(time.Now().Truncate(time.Second))
	gh := oidctest.New(t, oidctest.WithClock(clock.Now))
	k8s := oidctest.New(t, oidctest.WithClock(clock.Now))
	cfg := Config{Issuers: []IssuerConfig{
		{Issuer: gh.URL + "/", Audience: audience},
		{Issuer: k8s.URL, Audience: audience},
	}}
	v, err := New(t.Context(), cfg, Options{HTTPClient: gh.Client, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	tok := gh.Mint(map[string]any{"iss": gh.URL + "/", "aud": audience, "sub": "x"})
	_, err = v.Verify(t.Context(), tok)
	if reasonOf(t, err) != ReasonIssuerUnavailable || !strings.Contains(err.Error(), "names issuer") {
		t.Fatalf("discovery issuer mismatch: %v", err)
	}
	_, err = v.Verify(t.Context(), k8s.Mint(map[string]any{"aud": audience, "sub": "x"}))
	if reasonOf(t, err) != ReasonIssuerUnavailable || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted CA: %v", err)
	}
}

func TestNoKID(t *testing.T) {
	f := newFixture(t, nil)
	raw := f.gh.Mint(oidctest.GitHubClaims(audience), oidctest.WithHeader("kid", nil))
	if _, err := f.v.Verify(t.Context(), raw); err != nil {
		t.Fatalf("token without kid: %v", err)
	}
}

func TestActionsEndpoint(t *testing.T) {
	f := newFixture(t, nil)
	env := f.gh.ActionsEnv()
	// What a release job does: ask the runner's endpoint for a token with
	// our audience, then present it.
	raw := fetchActionsToken(t, f.gh, env[oidctest.EnvActionsRequestURL], env[oidctest.EnvActionsRequestToken], audience)
	if !LooksLikeJWT(raw) {
		t.Fatal("the Actions token does not look like a JWT")
	}
	tok, err := f.v.Verify(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tok.Roles, "signer") {
		t.Fatalf("roles %v", tok.Roles)
	}
	raw = fetchActionsToken(t, f.gh, env[oidctest.EnvActionsRequestURL], env[oidctest.EnvActionsRequestToken], "")
	if _, err := f.v.Verify(t.Context(), raw); reasonOf(t, err) != ReasonAudience {
		t.Fatalf("default audience: %v", err)
	}
}

func TestLooksLikeJWT(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want bool
	}{
		{"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", true},
		{"eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", true},
		{"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0", false},
		{"eyJhbGciOiJSUzI1NiJ9..c2ln", false},
		{"eyJ.a.b.c.d", false},
		{"abc.def.ghi", false},
		{"eyJhbGci+iJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", false},
		{"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln=", false},
		{"cs_0123456789abcdef", false},
		{"", false},
	} {
		if got := LooksLikeJWT(tt.s); got != tt.want {
			t.Errorf("LooksLikeJWT(%q) = %v", tt.s, got)
		}
	}
}

// fetchActionsToken does what a GitHub Actions client does with
// ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN.
func fetchActionsToken(t *testing.T, is *oidctest.Issuer, reqURL, reqToken, aud string) string {
	t.Helper()
	if aud != "" {
		reqURL += "&audience=" + url.QueryEscape(aud)
	}
	req, err := http.NewRequest(http.MethodGet, reqURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "bearer "+reqToken)
	resp, err := is.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Actions endpoint: %s", resp.Status)
	}
	var body struct {
		Value string `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Value
}

// TestRolesScopedToIssuer: a rule grants roles to its own issuer's tokens
// only; another issuer's token with claims that match it gets none.
func TestRolesScopedToIssuer(t *testing.T) {
	f := newFixture(t, nil)
	// GitHub-shaped claims, matching the GitHub rules, from the Kubernetes
	// issuer (any issuer can put any claim in its tokens).
	tok, err := f.v.Verify(t.Context(), f.k8s.Mint(oidctest.GitHubClaims(audience)))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Issuer != f.k8s.URL || len(tok.Roles) != 0 {
		t.Fatalf("a %s token with GitHub-shaped claims got roles %v; want none (the GitHub rules are %s's)", tok.Issuer, tok.Roles, f.gh.URL)
	}
	// The same claims from GitHub's issuer do get them.
	tok, err = f.v.Verify(t.Context(), f.gh.Mint(oidctest.GitHubClaims(audience)))
	if err != nil || len(tok.Roles) == 0 {
		t.Fatalf("the GitHub token: roles %v, %v", tok.Roles, err)
	}
}
