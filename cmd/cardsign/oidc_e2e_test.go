package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/oidctest"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// paymentsCard is the card acme/payments' pipeline releases.
const paymentsCard = `{
  "name": "Payments Agent",
  "description": "Takes payments",
  "supportedInterfaces": [{"url": "https://payments.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
  "version": "1.2.0",
  "capabilities": {},
  "defaultInputModes": ["text/plain"],
  "defaultOutputModes": ["text/plain"],
  "skills": [{"id": "pay", "name": "Pay", "description": "Takes a payment", "tags": ["payments"]}]
}`

// acmeOIDC is cardsignd's auth.oidc section trusting is for the acme
// organisation's pipelines: repositories acme/* get roles.
func acmeOIDC(is *oidctest.Issuer, roles string) string {
	return fmt.Sprintf(`  oidc:
    issuers:
      - issuer: %[1]s
        audience: cardsign
        ca_file: %[2]s
        claims: {repository_owner: acme}
    rules:
      - issuer: %[1]s
        claims: {repository: "acme/*"}
        roles: [%[3]s]
`, is.URL, is.CAFile, roles)
}

// TestOIDCPipelineSigns is a release pipeline signing with its own identity:
// cardsign obtains a GitHub Actions identity token from the (stand-in) token
// endpoint, cardsignd verifies it against a real HTTPS issuer, its claims
// decide what it may sign, and the audit record names the run.
func TestOIDCPipelineSigns(t *testing.T) {
	is := oidctest.New(t)
	dir := t.TempDir()
	d := runDaemon(t, daemonBin, filepath.Join(dir, "data"), `limits:
  rate: 0
auth:
`+acmeOIDC(is, "signer, auditor")+`policy:
  rules:
    - name: payments-release
      roles: [signer]
      card_names: ["Payments Agent"]
      hosts: [payments.example.com]
      claims: {repository: acme/payments, ref: "refs/tags/v*"}
`)
	grpcAddr, httpAddr := d.grpc, d.http
	cardFile := filepath.Join(dir, "card.json")
	writeFile(t, cardFile, []byte(paymentsCard))

	// Inside a GitHub Actions job with id-token: write.
	clearConnEnv(t)
	clearIDTokenEnv(t)
	for k, v := range is.ActionsEnv() {
		t.Setenv(k, v)
	}
	t.Setenv("SSL_CERT_FILE", is.CAFile) // the stand-in endpoint's TLS
	t.Setenv(idTokenAudienceEnv, "cardsign")
	requestToken := is.ActionsRequestToken()

	signed := cardsign(t, dir, nil, "sign", "--server", grpcAddr, cardFile)
	if signed.Code != 0 {
		t.Fatalf("sign from the pipeline: exit %d\n%s", signed.Code, signed.Stderr)
	}
	if is.ActionsRequests() == 0 {
		t.Fatal("cardsign signed without asking the Actions endpoint for a token")
	}
	verified := cardsign(t, dir, []byte(signed.Stdout), "verify", "--jwks", "http://"+httpAddr+"/.well-known/jwks.json", "-")
	if verified.Code != 0 {
		t.Fatalf("the pipeline's signed card does not verify: %s", verified.Stderr)
	}

	// Another repository of the organisation: authenticated (acme/*), but
	// the policy's claims refuse it, naming the rule and the claim.
	shop := oidctest.GitHubClaims("")
	shop["repository"], shop["sub"] = "acme/shop", "repo:acme/shop:ref:refs/tags/v3.0.0"
	is.SetActionsClaims(shop)
	refused := cardsign(t, dir, nil, "sign", "--server", grpcAddr, cardFile)
	if refused.Code == 0 || !strings.Contains(refused.Stderr, `rule "payments-release"`) || !strings.Contains(refused.Stderr, "claim repository") ||
		!strings.Contains(refused.Stderr, `"acme/shop"`) {
		t.Fatalf("acme/shop's pipeline: exit %d, stderr %s; want a refusal naming rule payments-release and claim repository", refused.Code, refused.Stderr)
	}

	// The audit log names both runs.
	is.SetActionsClaims(oidctest.GitHubClaims(""))
	list := cardsign(t, dir, nil, "audit", "list", "--server", grpcAddr, "--json")
	if list.Code != 0 {
		t.Fatalf("audit list: %s", list.Stderr)
	}
	type listed struct {
		Outcome    string            `json:"outcome"`
		Caller     string            `json:"caller"`
		Provenance map[string]string `json:"provenance"`
	}
	var recs []listed
	for _, line := range strings.Split(strings.TrimSpace(list.Stdout), "\n") {
		var r listed
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit list line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	if len(recs) < 2 {
		t.Fatalf("%d audit records, want the signature and the refusal", len(recs))
	}
	sig, ref := recs[len(recs)-2], recs[len(recs)-1]
	if sig.Outcome != "signed" || sig.Caller != "oidc:"+is.URL+"#repo:acme/payments:ref:refs/tags/v1.2.0" ||
		sig.Provenance["repository"] != "acme/payments" || sig.Provenance["run_id"] != "9876543210" ||
		sig.Provenance["sha"] != "2f1c0b7e4d3a59e8c6b1a0f9e8d7c6b5a4938271" || sig.Provenance["iss"] != is.URL {
		t.Fatalf("the signature's record does not name the run: %+v", sig)
	}
	if ref.Outcome != "refused" || ref.Provenance["repository"] != "acme/shop" {
		t.Fatalf("the refusal's record does not name the run: %+v", ref)
	}
	if v := cardsign(t, dir, nil, "audit", "verify", "--server", grpcAddr); v.Code != 0 {
		t.Fatalf("audit verify over records with provenance: %s", v.Stderr)
	}

	// Hostile tokens, each refused with its reason, never echoed.
	for _, tc := range []struct {
		name, token, reason string
	}{
		{"expired", mintAt(is, time.Now().Add(-time.Hour)), "expired"},
		{"wrong audience", is.Mint(oidctest.GitHubClaims("someone-else")), "audience"},
		{"alg none", is.Mint(oidctest.GitHubClaims("cardsign"), oidctest.WithHeader("alg", "none"), oidctest.WithNoSignature()), "alg"},
		{"other organisation", is.Mint(withClaim(oidctest.GitHubClaims("cardsign"), "repository_owner", "evil")), "claims"},
	} {
		tokFile := testsupport.WriteFileMode(t, filepath.Join(dir, "token-"+strings.ReplaceAll(tc.name, " ", "-")), tc.token, 0o600)
		r := cardsign(t, dir, nil, "sign", "--server", grpcAddr, "--id-token", tokFile, cardFile)
		if r.Code == 0 || !strings.Contains(r.Stderr, "identity token refused: "+tc.reason) || !strings.Contains(r.Stderr, "hint: cardsignd refused the OIDC identity token") {
			t.Errorf("%s: exit %d, stderr %s; want UNAUTHENTICATED naming %q, with a hint about identity tokens", tc.name, r.Code, r.Stderr, tc.reason)
		}
		if strings.Contains(r.Stdout+r.Stderr, tc.token) || strings.Contains(r.Stdout+r.Stderr, requestToken) {
			t.Errorf("%s: a token appears in the output", tc.name)
		}
	}

	// A valid token of the organisation that no auth.oidc rule matches
	// (acme-labs/* is not acme/*): refused, saying so.
	labs := withClaim(oidctest.GitHubClaims("cardsign"), "repository", "acme-labs/tool")
	norule := testsupport.WriteFileMode(t, filepath.Join(dir, "token-no-rule"), is.Mint(labs), 0o600)
	if r := cardsign(t, dir, nil, "sign", "--server", grpcAddr, "--id-token", norule, cardFile); r.Code == 0 ||
		!strings.Contains(r.Stderr, "PermissionDenied") || !strings.Contains(r.Stderr, "no rule matched") || !strings.Contains(r.Stderr, "hint: cardsignd verified the identity token") {
		t.Errorf("a token matching no rule: exit %d, stderr %s; want PERMISSION_DENIED saying no rule matched", r.Code, r.Stderr)
	}

	// The refusals are in the metrics, by reason (an auditor's token reads them).
	req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+is.Mint(oidctest.GitHubClaims("cardsign")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics with an auditor's identity token: %d %s", resp.StatusCode, body)
	}
	for _, reason := range []string{"expired", "audience", "alg", "claims"} {
		if want := fmt.Sprintf(`cardsign_auth_failures_total{method="oidc",reason=%q} 1`, reason); !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// mintAt mints a GitHub-shaped token for cardsign issued at iat, valid 5
// minutes from then.
func mintAt(is *oidctest.Issuer, iat time.Time) string {
	c := oidctest.GitHubClaims("cardsign")
	c["iat"], c["nbf"], c["exp"] = iat.Unix(), iat.Unix(), iat.Add(5*time.Minute).Unix()
	return is.Mint(c)
}

func withClaim(c map[string]any, name string, v any) map[string]any {
	c[name] = v
	return c
}
