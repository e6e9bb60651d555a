package oidctest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

func getJSON(t *testing.T, c *http.Client, url string, v any) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// verify checks raw against the issuer's published JWKS with go-jose, an
// independent implementation, and returns the claims.
func verify(t *testing.T, is *Issuer, raw string) map[string]any {
	t.Helper()
	var set jose.JSONWebKeySet
	if code := getJSON(t, is.Client, is.JWKSURL(), &set); code != http.StatusOK {
		t.Fatalf("JWKS: %d", code)
	}
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	keys := set.Key(jws.Signatures[0].Header.KeyID)
	if len(keys) != 1 {
		t.Fatalf("kid %q: %d keys in the JWKS", jws.Signatures[0].Header.KeyID, len(keys))
	}
	payload, err := jws.Verify(keys[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

func TestDiscoveryAndMint(t *testing.T) {
	for _, alg := range []string{"RS256", "ES256"} {
		t.Run(alg, func(t *testing.T) {
			clock := NewClock(time.Unix(1_800_000_000, 0))
			is := New(t, WithAlgorithm(alg), WithClock(clock.Now))
			if !strings.HasPrefix(is.URL, "https://127.0.0.1:") {
				t.Fatalf("URL %q", is.URL)
			}
			var doc struct {
				Issuer  string   `json:"issuer"`
				JWKSURI string   `json:"jwks_uri"`
				Algs    []string `json:"id_token_signing_alg_values_supported"`
			}
			getJSON(t, is.Client, is.URL+DiscoveryPath, &doc)
			if doc.Issuer != is.URL || doc.JWKSURI != is.JWKSURL() || len(doc.Algs) == 0 {
				t.Fatalf("discovery %+v", doc)
			}
			claims := verify(t, is, is.Mint(GitHubClaims("cardsign")))
			if claims["iss"] != is.URL || claims["sub"] != "repo:acme/payments:ref:refs/tags/v1.2.0" ||
				claims["exp"].(float64) != 1_800_000_300 || claims["iat"].(float64) != 1_800_000_000 {
				t.Fatalf("claims %v", claims)
			}
			if is.DiscoveryFetches() != 1 || is.JWKSFetches() != 1 {
				t.Fatalf("fetches %d %d", is.DiscoveryFetches(), is.JWKSFetches())
			}
		})
	}
}

func TestRotateAndOutage(t *testing.T) {
	is := New(t)
	old := is.SigningKey()
	k := is.Rotate("ES256", false)
	if k == old || k.KID == old.KID || is.SigningKey() != k {
		t.Fatal("Rotate did not switch keys")
	}
	verify(t, is, is.Mint(nil))
	verify(t, is, is.Mint(nil, WithKey(old)))
	is.Rotate("", true)
	var set jose.JSONWebKeySet
	getJSON(t, is.Client, is.JWKSURL(), &set)
	if len(set.Keys) != 1 || set.Keys[0].KeyID == k.KID {
		t.Fatalf("after dropOld: %d keys", len(set.Keys))
	}

	is.SetCacheMaxAge(60)
	resp, err := is.Client.Get(is.JWKSURL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cc := resp.Header.Get("Cache-Control"); cc != "public, max-age=60" {
		t.Fatalf("Cache-Control %q", cc)
	}

	is.SetDown(true)
	if code := getJSON(t, is.Client, is.URL+DiscoveryPath, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("down: %d", code)
	}
	is.SetDown(false)
	if code := getJSON(t, is.Client, is.URL+DiscoveryPath, nil); code != http.StatusOK {
		t.Fatalf("up: %d", code)
	}
}

func TestMintOptions(t *testing.T) {
	is := New(t)
	header := func(raw string) string {
		h, _, _ := strings.Cut(raw, ".")
		return h
	}
	if raw := is.Mint(nil, WithNoSignature()); !strings.HasSuffix(raw, ".") {
		t.Fatalf("unsigned token %q has a signature", raw)
	}
	if raw := is.Mint(nil, WithRawHeader(`{"alg":"RS256","alg":"none"}`)); header(raw) != "eyJhbGciOiJSUzI1NiIsImFsZyI6Im5vbmUifQ" {
		t.Fatalf("raw header not verbatim: %s", header(raw))
	}
	raw := is.Mint(map[string]any{"exp": nil, "x": "y"}, WithHeader("crit", []string{"exp"}))
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jws.Verify(is.SigningKey().Signer.Public()); err == nil {
		t.Fatal("go-jose accepted an unknown crit header")
	}
	claims := jws.UnsafePayloadWithoutVerification()
	if strings.Contains(string(claims), `"exp"`) || !strings.Contains(string(claims), `"x":"y"`) {
		t.Fatalf("claims %s", claims)
	}
	if !strings.Contains(string(is.SigningKey().PublicPEM()), "BEGIN PUBLIC KEY") {
		t.Fatal("PublicPEM")
	}
}

func TestActionsEndpoint(t *testing.T) {
	is := New(t)
	env := is.ActionsEnv()
	get := func(token, audience string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, env[EnvActionsRequestURL]+"&audience="+audience, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "bearer "+token)
		resp, err := is.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Value string `json:"value"`
		}
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, body.Value
	}
	if code, _ := get("wrong", "cardsign"); code != http.StatusUnauthorized {
		t.Fatalf("wrong request token: %d", code)
	}
	code, raw := get(env[EnvActionsRequestToken], "cardsign")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	claims := verify(t, is, raw)
	if claims["aud"] != "cardsign" || claims["repository"] != "acme/payments" {
		t.Fatalf("claims %v", claims)
	}
	is.SetActionsClaims(map[string]any{"sub": "repo:acme/other:ref:refs/heads/main", "repository_owner": "acme"})
	_, raw = get(env[EnvActionsRequestToken], "")
	claims = verify(t, is, raw)
	if claims["aud"] != "https://github.com/acme" || claims["sub"] != "repo:acme/other:ref:refs/heads/main" {
		t.Fatalf("claims %v", claims)
	}
	if is.ActionsRequests() != 3 {
		t.Fatalf("ActionsRequests %d", is.ActionsRequests())
	}
}
