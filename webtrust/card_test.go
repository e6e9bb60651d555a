package webtrust

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/transparency"
)

// testKey is a P-256 signing key with its kid.
type testKey struct {
	kid string
	key *ecdsa.PrivateKey
}

func newTestKey(t *testing.T, kid string) testKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{kid, k}
}

func (k testKey) jwk(t *testing.T) jose.JWK {
	j, err := jose.NewJWK(k.key.Public(), k.kid, jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func jwksOf(t *testing.T, keys ...testKey) []byte {
	var set jwks.Set
	for _, k := range keys {
		set.Keys = append(set.Keys, k.jwk(t))
	}
	b, err := set.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const testCard = `{"name":"Billing Agent","description":"Pays invoices","version":"1.0.0",
"supportedInterfaces":[{"url":"https://agents.example/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
"capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],
"skills":[{"id":"pay","name":"Pay","description":"Pays an invoice","tags":["billing"]}]}`

// signCard signs testCard with k (jku, when set, in its header).
func signCard(t *testing.T, k testKey, jku string) []byte {
	return signCardText(t, testCard, k, jku)
}

func signCardText(t *testing.T, text string, k testKey, jku string) []byte {
	res, err := signer.Sign(t.Context(), []byte(text), signer.Options{
		Keys: []signer.Key{{Signer: k.key, Alg: jose.ES256, KID: k.kid}}, JKU: jku,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Card
}

func signRevocations(t *testing.T, by testKey, issued time.Time, r jwks.Revocations) []byte {
	r.Sequence, r.IssuedAt, r.ExpiresAt = 1, issued, issued.Add(48*time.Hour)
	b, err := jwks.SignRevocations(t.Context(), r, by.key, jose.ES256, by.kid)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVerifyCard(t *testing.T) {
	p := newPKI(t)
	now := time.Now()
	k1, k2, k3 := newTestKey(t, "k1"), newTestKey(t, "k2"), newTestKey(t, "k3")
	revokedCard := signCardText(t, strings.Replace(testCard, "Billing Agent", "Withdrawn Agent", 1), k1, "")
	var cardSum [32]byte
	{
		v, err := signer.Verify(t.Context(), revokedCard, signer.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cardSum = v.CanonicalSHA256
	}
	keys := http.NewServeMux()
	keys.HandleFunc("/jwks.json", func(w http.ResponseWriter, r *http.Request) { w.Write(jwksOf(t, k1, k2)) })
	keys.HandleFunc("/evil-jwks.json", func(w http.ResponseWriter, r *http.Request) { w.Write(jwksOf(t, k3)) })
	revocations := signRevocations(t, k1, now.Add(-time.Minute), jwks.Revocations{
		Revoked: []jwks.Revocation{{KID: "k2", RevokedAt: now.Add(-time.Minute), Reason: "key-compromise"}},
	})
	staleRevocations := signRevocations(t, k1, now.Add(-2*time.Hour), jwks.Revocations{})
	cardRevocations := signRevocations(t, k1, now.Add(-time.Minute), jwks.Revocations{
		Cards: []jwks.CardRevocation{{CanonicalSHA256: cardSum[:], AgentID: "billing", Version: 1, RevokedAt: now.Add(-time.Minute), Reason: "withdrawn"}},
	})
	keys.HandleFunc("/revocations.json", func(w http.ResponseWriter, r *http.Request) { w.Write(revocations) })
	keys.HandleFunc("/stale-revocations.json", func(w http.ResponseWriter, r *http.Request) { w.Write(staleRevocations) })
	keys.HandleFunc("/card-revocations.json", func(w http.ResponseWriter, r *http.Request) { w.Write(cardRevocations) })
	didDoc, err := aicatalog.DIDDocument("keys.example", []aicatalog.VerificationKey{{Fragment: "k1", Public: k1.key.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	keys.HandleFunc(aicatalog.DIDPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/did+ld+json")
		w.Write(didDoc)
	})
	keySite := p.newSite(t, keys, "keys.example")

	cards := map[string][]byte{
		"good.agents.example":      signCard(t, k1, ""),
		"did.agents.example":       signCard(t, k1, ""),
		"revoked.agents.example":   signCard(t, k2, ""),
		"stale.agents.example":     signCard(t, k1, ""),
		"untrusted.agents.example": signCard(t, k3, ""),
		"jku.agents.example":       signCard(t, k3, "https://keys.example/evil-jwks.json"),
		"logged.agents.example":    signCard(t, k1, ""),
		"withdrawn.agents.example": revokedCard,
		"norule.agents.example":    signCard(t, k1, ""),
		"unsigned.agents.example":  []byte(testCard),
	}
	hosts := make([]string, 0, len(cards))
	for h := range cards {
		hosts = append(hosts, h)
	}
	agentSite := p.newSite(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != AgentCardPath {
			http.NotFound(w, r)
			return
		}
		w.Write(cards[r.Host])
	}), hosts...)

	logPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := transparency.VerifierKey("log.example/log", logPub)
	if err != nil {
		t.Fatal(err)
	}
	const jwksURL = "https://keys.example/jwks.json"
	policy := `rules:
  - host: good.agents.example
    jwks: ` + jwksURL + `
    revocations: https://keys.example/revocations.json
  - host: did.agents.example
    did: did:web:keys.example
  - host: revoked.agents.example
    jwks: ` + jwksURL + `
    revocations: https://keys.example/revocations.json
    max_revocations_age: 1h
  - host: stale.agents.example
    jwks: ` + jwksURL + `
    revocations: https://keys.example/stale-revocations.json
    max_revocations_age: 1h
  - host: logged.agents.example
    jwks: ` + jwksURL + `
    log_key: ` + vkey + `
    require_log_proof: true
  - host: "*.agents.example"
    jwks: ` + jwksURL + `
    revocations: https://keys.example/card-revocations.json
`
	dir := t.TempDir()
	path := filepath.Join(dir, "trust.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	pol, err := LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	// Without the last rule (the wildcard), norule.agents.example has none.
	narrow := &Policy{Rules: pol.Rules[:len(pol.Rules)-1]}

	for _, tc := range []struct {
		host   string
		policy *Policy
		code   string // "" = accepted
		detail string
	}{
		{"good.agents.example", pol, "", ""},
		{"did.agents.example", pol, "", ""},
		{"revoked.agents.example", pol, ReasonKeyRevoked, "revoked key (kid k2"},
		{"stale.agents.example", pol, ReasonRevocationsInvalid, "longer ago than the 1h0m0s"},
		{"untrusted.agents.example", pol, ReasonSignatureInvalid, "k3"},
		{"jku.agents.example", pol, ReasonSignatureInvalid, "k3"},
		{"logged.agents.example", pol, ReasonLogProofMissing, ""},
		{"withdrawn.agents.example", pol, ReasonCardRevoked, "withdrawn"},
		{"unsigned.agents.example", pol, ReasonUnsigned, ""},
		{"norule.agents.example", narrow, ReasonNoTrustRule, `"norule.agents.example"`},
	} {
		t.Run(tc.host, func(t *testing.T) {
			c := p.newTestClient(t, Options{Policy: tc.policy}, keySite, agentSite)
			before := agentSite.hits.Load()
			res, err := c.VerifyCard(t.Context(), "https://"+tc.host)
			if err != nil {
				t.Fatal(err)
			}
			if tc.code == "" {
				if !res.Accepted() {
					t.Fatalf("refused: %+v", res.Reasons)
				}
				return
			}
			if res.Accepted() || len(res.Reasons) != 1 || res.Reasons[0].Code != tc.code || !strings.Contains(res.Reasons[0].Detail, tc.detail) {
				t.Fatalf("reasons %+v, want %s containing %q", res.Reasons, tc.code, tc.detail)
			}
			if tc.code == ReasonNoTrustRule && agentSite.hits.Load() != before {
				t.Error("a host with no rule was fetched")
			}
		})
	}

	for _, bad := range []string{"http://good.agents.example", "https://good.agents.example/path", "good.agents.example", "https://u@good.agents.example"} {
		c := p.newTestClient(t, Options{Policy: pol}, keySite, agentSite)
		if _, err := c.VerifyCard(t.Context(), bad); err == nil {
			t.Errorf("%q accepted as a host URL", bad)
		}
	}
}
