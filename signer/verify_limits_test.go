package signer

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

// recordingFetch is a FetchJKU that serves set for every URL and records
// which URLs it was asked for.
type recordingFetch struct {
	set  KeySource
	urls []string
}

func (r *recordingFetch) fetch(_ context.Context, u string) (KeySource, error) {
	r.urls = append(r.urls, u)
	return r.set, nil
}

// Issue 10 item 1: the allow-list is checked on the normalized jku, and
// the normalized URL is what gets fetched.
func TestVerifyJKUAllowListOnNormalizedURL(t *testing.T) {
	k := newKey(t, jose.ES256)
	allow := []string{"https://keys.example.com/good/", "https://other.example.com/exact"}
	tests := []struct {
		jku   string
		fetch string // the URL fetched; "" means the jku must not be followed
	}{
		{"https://keys.example.com/good/jwks.json", "https://keys.example.com/good/jwks.json"},
		{"HTTPS://Keys.Example.COM:443/good/./a/../jwks.json", "https://keys.example.com/good/jwks.json"},
		{"https://keys.example.com/good/%6a%77ks.json", "https://keys.example.com/good/jwks.json"},
		{"https://other.example.com/exact", "https://other.example.com/exact"},
		{"https://other.example.com/exact/jwks.json", "https://other.example.com/exact/jwks.json"},
		{"https://keys.example.com/good/../evil/jwks.json", ""},
		{"https://keys.example.com/good/%2e%2e/evil/jwks.json", ""},
		{"https://keys.example.com/good/%2E%2e/evil/jwks.json", ""},
		{"https://keys.example.com/good/..%2fevil/jwks.json", ""},
		{"https://keys.example.com/good/..%5cevil/jwks.json", ""},
		{`https://keys.example.com/good/..\evil/jwks.json`, ""},
		{"https://keys.example.com/good//../evil/jwks.json", ""},
		{"https://keys.example.com/good/..;/evil/jwks.json", ""},
		{"https://keys.example.com/good/%252e%252e/evil/jwks.json", ""},
		{"https://keys.example.com/good/%zz/jwks.json", ""},
		{"https://user:pw@keys.example.com/good/jwks.json", ""},
		{"https://keys.example.com/good/jwks.json#frag", ""},
		{"https://keys.example.com/goodevil/jwks.json", ""},
		{"https://other.example.com/exact-evil/jwks.json", ""},
		{"https://other.example.com/exactly", ""},
		{"https://keys.example.com:8443/good/jwks.json", ""},
		{"http://keys.example.com/good/jwks.json", ""},
		{"ftp://keys.example.com/good/jwks.json", ""},
		{"https://keys.example.com.evil.org/good/jwks.json", ""},
	}
	for _, tc := range tests {
		t.Run(tc.jku, func(t *testing.T) {
			hdr, _ := json.Marshal(map[string]string{"alg": "ES256", "kid": k.KID, "typ": "JOSE", "jku": tc.jku})
			data := forge(t, k, string(hdr), nil)
			rf := &recordingFetch{set: keySet(k)}
			v := mustVerify(t, data, VerifyOptions{AllowJKU: allow, FetchJKU: rf.fetch})
			if tc.fetch == "" {
				if len(rf.urls) != 0 || v.Valid(false) {
					t.Fatalf("jku %q followed: fetched %q, checks %+v", tc.jku, rf.urls, v.Checks)
				}
				return
			}
			if len(rf.urls) != 1 || rf.urls[0] != tc.fetch || !v.Valid(false) {
				t.Fatalf("jku %q: fetched %q, want [%s]; checks %+v", tc.jku, rf.urls, tc.fetch, v.Checks)
			}
		})
	}
}

// Issue 10 item 9: each jku is fetched once per Verify call, even when it
// fails, and a card with more signatures than the cap is refused before
// anything is fetched or checked.
func TestVerifyFetchesJKUOnceAndCapsSignatures(t *testing.T) {
	k := newKey(t, jose.ES256)
	hdr, _ := json.Marshal(map[string]string{"alg": "ES256", "kid": k.KID, "typ": "JOSE", "jku": "https://keys.example.com/jwks.json"})
	withSigs := func(n int) []byte {
		var c map[string]any
		if err := json.Unmarshal(forge(t, k, string(hdr), nil), &c); err != nil {
			t.Fatal(err)
		}
		one := c["signatures"].([]any)[0]
		sigs := make([]any, n)
		for i := range sigs {
			sigs[i] = one
		}
		c["signatures"] = sigs
		out, _ := json.Marshal(c)
		return out
	}
	allow := []string{"https://keys.example.com/"}

	rf := &recordingFetch{set: keySet(k)}
	v, err := Verify(context.Background(), withSigs(DefaultMaxSignatures), VerifyOptions{AllowJKU: allow, FetchJKU: rf.fetch})
	if err != nil || !v.Valid(true) || len(rf.urls) != 1 {
		t.Fatalf("%d signatures: err %v, fetches %d, want 1", DefaultMaxSignatures, err, len(rf.urls))
	}

	failures := 0
	failing := func(context.Context, string) (KeySource, error) { failures++; return nil, errors.New("boom") }
	v, err = Verify(context.Background(), withSigs(5), VerifyOptions{AllowJKU: allow, FetchJKU: failing})
	if err != nil || v.Valid(false) || failures != 1 {
		t.Fatalf("failing fetch: err %v, %d fetches, want 1", err, failures)
	}
	for _, c := range v.Checks {
		if !strings.Contains(c.Reason, "boom") {
			t.Errorf("check %d: reason %q does not carry the fetch error", c.Index, c.Reason)
		}
	}

	rf = &recordingFetch{set: keySet(k)}
	_, err = Verify(context.Background(), withSigs(DefaultMaxSignatures+1), VerifyOptions{AllowJKU: allow, FetchJKU: rf.fetch})
	var ce *strictjson.Error
	if !errors.As(err, &ce) || ce.Path != "signatures" || !strings.Contains(err.Error(), "16") || len(rf.urls) != 0 {
		t.Fatalf("%d signatures: err %v, fetches %d; want a strictjson.Error at signatures naming the limit, no fetch", DefaultMaxSignatures+1, err, len(rf.urls))
	}
	if ce != nil && ce.Rule != RuleMaxSignatures {
		t.Errorf("rule %q, want %q", ce.Rule, RuleMaxSignatures)
	}
	if _, err := Verify(context.Background(), withSigs(20), VerifyOptions{Trusted: keySet(k), MaxSignatures: 20}); err != nil {
		t.Fatalf("MaxSignatures 20: %v", err)
	}
}

// A context that ends stops Verify with its error rather than reporting
// every remaining signature as failed.
func TestVerifyStopsWhenContextEnds(t *testing.T) {
	k := newKey(t, jose.ES256)
	data := forge(t, k, `{"alg":"ES256","kid":"`+k.KID+`","typ":"JOSE"}`, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Verify(ctx, data, VerifyOptions{Trusted: keySet(k)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Verify with a cancelled context: %v", err)
	}
}
