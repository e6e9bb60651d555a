package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/oidctest"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/tlogclient"
)

// approvalsPolicy is the signing policy of the approvals scenarios: acme's
// payments pipeline may sign its card; a new host needs two of the
// security group; a new skill needs one approver within 2 seconds; test
// builds are never signed.
func approvalsPolicy(alice, bob string) string {
	return fmt.Sprintf(`policy:
  groups:
    security: [%q, %q]
  rules:
    - name: payments-release
      roles: [signer]
      card_names: ["Payments Agent"]
      hosts: [payments.example.com, "*.payments.example.com"]
    - name: no-test-builds
      when: card.version.endsWith("-test")
      outcome: deny
      message: test builds are not signed
    - name: new-host
      when: "!diff.first && size(diff.hosts_added) > 0"
      outcome: require_approval
      message: a new host needs the security team
      approvals: {count: 2, group: security}
    - name: new-skill
      when: "!diff.first && size(diff.skills_added) > 0"
      outcome: require_approval
      approvals: {count: 1, ttl: 2s}
`, alice, bob)
}

// paymentsCardWith is paymentsCard at version, with more interfaces and
// skills.
func paymentsCardWith(t *testing.T, version string, hosts []string, skills []string) []byte {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal([]byte(paymentsCard), &c); err != nil {
		t.Fatal(err)
	}
	c["version"] = version
	ifaces := c["supportedInterfaces"].([]any)
	for _, h := range hosts {
		ifaces = append(ifaces, map[string]any{"url": "https://" + h + "/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"})
	}
	c["supportedInterfaces"] = ifaces
	sk := c["skills"].([]any)
	for _, s := range skills {
		sk = append(sk, map[string]any{"id": s, "name": s, "description": "does " + s, "tags": []string{s}})
	}
	c["skills"] = sk
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// approvalsWorld is a daemon with OIDC callers and the approvals policy,
// and the identity tokens of a pipeline and of three people.
type approvalsWorld struct {
	is                            *oidctest.Issuer
	dir, grpc, http               string
	pipeline, alice, bob, mallory string // token files
	pipelineID, aliceID, bobID    string // identities
}

func newApprovalsWorld(t *testing.T) *approvalsWorld {
	is := oidctest.New(t)
	w := &approvalsWorld{dir: t.TempDir(), is: is}
	id := func(sub string) string { return "oidc:" + is.URL + "#" + sub }
	w.pipelineID, w.aliceID, w.bobID = id("repo:acme/payments:ref:refs/tags/v1.2.0"), id("user:alice"), id("user:bob")
	d := runDaemon(t, daemonBin, filepath.Join(w.dir, "data"), fmt.Sprintf(`limits:
  rate: 0
auth:
  oidc:
    issuers:
      - issuer: %[1]s
        audience: cardsign
        ca_file: %[2]s
        claims: {repository_owner: acme}
    rules:
      - issuer: %[1]s
        claims: {repository: acme/payments}
        roles: [signer, approver]
      - issuer: %[1]s
        claims: {repository: acme/security-desk}
        roles: [approver, auditor]
`, is.URL, is.CAFile)+approvalsPolicy(w.aliceID, w.bobID))
	w.grpc, w.http = d.grpc, d.http
	token := func(name string, sub, repo string) string {
		c := oidctest.GitHubClaims("cardsign")
		if sub != "" {
			c["sub"], c["repository"] = sub, repo
		}
		f := filepath.Join(w.dir, name+".jwt")
		writeFile(t, f, []byte(is.Mint(c)))
		return f
	}
	w.pipeline = token("pipeline", "", "")
	w.alice = token("alice", "user:alice", "acme/security-desk")
	w.bob = token("bob", "user:bob", "acme/security-desk")
	w.mallory = token("mallory", "user:mallory", "acme/security-desk")
	t.Setenv("SSL_CERT_FILE", is.CAFile)
	return w
}

// as runs cardsign against the world's daemon with the identity token in
// tokenFile.
func (w *approvalsWorld) as(t *testing.T, tokenFile string, args ...string) result {
	t.Helper()
	return cardsign(t, w.dir, nil, append(append(args, "--server", w.grpc), "--id-token", tokenFile)...)
}

var heldID = regexp.MustCompile(`approval (apr_[a-z0-9]+)`)

// TestApprovalsEndToEnd: a release pipeline adds a host and waits; the
// requester and an approver outside the security group are refused; two of
// the group approve the exact digest; the card is signed, verifies with
// @a2a-js/sdk, and every step is in the audit log and the transparency
// log. An approval that expired can be neither approved nor used, and a
// deny rule refuses at once.
func TestApprovalsEndToEnd(t *testing.T) {
	clearConnEnv(t)
	clearIDTokenEnv(t)
	w := newApprovalsWorld(t)
	write := func(name string, data []byte) string {
		f := filepath.Join(w.dir, name)
		writeFile(t, f, data)
		return f
	}
	v1 := write("v1.json", paymentsCardWith(t, "1.2.0", nil, nil))
	if r := w.as(t, w.pipeline, "sign", "--register", "--visibility", "public", v1); r.Code != exitOK {
		t.Fatalf("first version (no previous card, no rule holds): exit %d\n%s", r.Code, r.Stderr)
	}

	// A new host: the pipeline waits for approval.
	v2 := write("v2.json", paymentsCardWith(t, "1.3.0", []string{"eu.payments.example.com"}, nil))
	waited := make(chan result, 1)
	go func() { waited <- w.as(t, w.pipeline, "sign", "--register", "--wait", "--wait-timeout", "2m", v2) }()
	var id string
	for deadline := time.Now().Add(30 * time.Second); id == ""; {
		r := w.as(t, w.alice, "approvals", "list", "--state", "pending", "--json")
		if r.Code != exitOK {
			t.Fatalf("approvals list: exit %d\n%s", r.Code, r.Stderr)
		}
		if line := strings.TrimSpace(r.Stdout); line != "" {
			var a approvalJSON
			if err := json.Unmarshal([]byte(strings.Split(line, "\n")[0]), &a); err != nil {
				t.Fatal(err)
			}
			if a.Rule != "new-host" || a.Requester != w.pipelineID || a.Required != 2 {
				t.Fatalf("pending approval %+v: want rule new-host, requester %s, 2 required", a, w.pipelineID)
			}
			id = a.ID
		}
		if time.Now().After(deadline) {
			t.Fatal("no pending approval 30s after the pipeline asked")
		}
		time.Sleep(200 * time.Millisecond)
	}
	show := w.as(t, w.alice, "approvals", "show", id)
	if show.Code != exitOK || !strings.Contains(show.Stdout, "+ host eu.payments.example.com") || !strings.Contains(show.Stdout, `"eu.payments.example.com/a2a"`[1:]) {
		t.Fatalf("approvals show: exit %d\n%s\n%s", show.Code, show.Stdout, show.Stderr)
	}
	var shown approvalJSON
	if r := w.as(t, w.alice, "approvals", "show", id, "--json"); r.Code != exitOK || json.Unmarshal([]byte(r.Stdout), &shown) != nil {
		t.Fatalf("approvals show --json: %s %s", r.Stdout, r.Stderr)
	}

	refusals := []struct {
		who  string
		args []string
		want string
	}{
		{w.pipeline, nil, "cannot approve it"},                                      // the requester, though it holds the approver role
		{w.mallory, nil, "not in approver group"},                                   // an approver outside the group
		{w.alice, []string{"--sha256", strings.Repeat("0", 64)}, "review it again"}, // other bytes than those reviewed
	}
	for _, rf := range refusals {
		r := w.as(t, rf.who, append([]string{"approvals", "approve", id}, rf.args...)...)
		if r.Code != exitFail || !strings.Contains(r.Stderr, rf.want) {
			t.Fatalf("approve as %s: exit %d, stderr %s; want a refusal containing %q", filepath.Base(rf.who), r.Code, r.Stderr, rf.want)
		}
	}
	if r := w.as(t, w.alice, "approvals", "approve", id, "--sha256", shown.CanonicalSHA256, "--reason", "EU host, SEC-142"); r.Code != exitOK || !strings.Contains(r.Stderr, "1 of 2") {
		t.Fatalf("alice approves: exit %d\n%s", r.Code, r.Stderr)
	}
	if r := w.as(t, w.alice, "approvals", "approve", id); r.Code != exitFail || !strings.Contains(r.Stderr, "voted already") {
		t.Fatalf("alice approves twice: exit %d\n%s", r.Code, r.Stderr)
	}
	select {
	case r := <-waited:
		t.Fatalf("sign --wait returned with one approval of two: exit %d\n%s", r.Code, r.Stderr)
	default:
	}
	if r := w.as(t, w.bob, "approvals", "approve", id); r.Code != exitOK || !strings.Contains(r.Stderr, "now approved") {
		t.Fatalf("bob approves: exit %d\n%s", r.Code, r.Stderr)
	}
	var signed result
	select {
	case signed = <-waited:
	case <-time.After(60 * time.Second):
		t.Fatal("sign --wait did not return 60s after the second approval")
	}
	if signed.Code != exitOK || !strings.Contains(signed.Stdout, `"signatures"`) {
		t.Fatalf("sign --wait: exit %d\n%s", signed.Code, signed.Stderr)
	}
	signedFile := write("v2.signed.json", []byte(signed.Stdout))
	jwksURL := "http://" + w.http + "/.well-known/jwks.json"
	if r := cardsign(t, w.dir, nil, "verify", "--jwks", jwksURL, signedFile); r.Code != exitOK {
		t.Fatalf("cardsign verify: %s", r.Stderr)
	}
	resp, err := http.Get(jwksURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	jwksFile := write("jwks.json", body)
	if res := verifyJS(t, jwksFile, signedFile)[signedFile]; !res.OK {
		t.Fatalf("@a2a-js/sdk refuses the approved card: %s", res.Error)
	}
	checkApprovalTrail(t, w, shown.CanonicalSHA256)

	// An approval that expired (rule new-skill: 2s) is closed.
	v3 := write("v3.json", paymentsCardWith(t, "1.4.0", []string{"eu.payments.example.com"}, []string{"refund"}))
	held := w.as(t, w.pipeline, "sign", "--register", v3)
	m := heldID.FindStringSubmatch(held.Stderr)
	if held.Code != exitHeld || m == nil {
		t.Fatalf("new skill: exit %d, want %d with an approval id\n%s", held.Code, exitHeld, held.Stderr)
	}
	time.Sleep(2500 * time.Millisecond)
	if r := w.as(t, w.alice, "approvals", "approve", m[1]); r.Code != exitFail || !strings.Contains(r.Stderr, "expired") {
		t.Fatalf("approving an expired request: exit %d\n%s", r.Code, r.Stderr)
	}
	if r := w.as(t, w.pipeline, "sign", "--register", "--approval", m[1], v3); r.Code != exitFail || !strings.Contains(r.Stderr, "expired") {
		t.Fatalf("signing under an expired approval: exit %d\n%s", r.Code, r.Stderr)
	}
	if r := w.as(t, w.alice, "approvals", "list", "--state", "expired", "--json"); !strings.Contains(r.Stdout, m[1]) {
		t.Fatalf("approvals list --state expired does not list %s: %s %s", m[1], r.Stdout, r.Stderr)
	}

	// A wait outlives the pipeline's identity token: when it expires, sign
	// --wait reads the token file again (a pipeline refreshes it).
	short := oidctest.GitHubClaims("cardsign")
	short["exp"] = time.Now().Add(2 * time.Second).Unix()
	writeFile(t, w.pipeline, []byte(w.is.Mint(short)))
	v4 := write("v4.json", paymentsCardWith(t, "1.6.0", []string{"eu.payments.example.com", "us.payments.example.com"}, nil))
	go func() { waited <- w.as(t, w.pipeline, "sign", "--register", "--wait", v4) }()
	var pending []approvalJSON
	for deadline := time.Now().Add(30 * time.Second); len(pending) == 0; time.Sleep(200 * time.Millisecond) {
		r := w.as(t, w.alice, "approvals", "list", "--state", "pending", "--json")
		for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			var a approvalJSON
			if json.Unmarshal([]byte(line), &a) == nil && a.Rule == "new-host" {
				pending = append(pending, a)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no pending approval for v4")
		}
	}
	writeFile(t, w.pipeline, []byte(w.is.Mint(oidctest.GitHubClaims("cardsign"))))
	time.Sleep(15 * time.Second) // the short token's exp, the daemon's 10 s of clock skew, and a poll
	for _, who := range []string{w.alice, w.bob} {
		if r := w.as(t, who, "approvals", "approve", pending[0].ID); r.Code != exitOK {
			t.Fatalf("approving v4: %s", r.Stderr)
		}
	}
	select {
	case r := <-waited:
		if r.Code != exitOK || !strings.Contains(r.Stderr, "using a fresh one") {
			t.Fatalf("sign --wait across the token's expiry: exit %d\n%s", r.Code, r.Stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("sign --wait did not return 60s after v4's approvals")
	}

	// A deny rule refuses at once, audited.
	test := write("test.json", paymentsCardWith(t, "1.5.0-test", nil, nil))
	if r := w.as(t, w.pipeline, "sign", test); r.Code != exitFail || !strings.Contains(r.Stderr, "test builds are not signed") || !strings.Contains(r.Stderr, `rule "no-test-builds"`) {
		t.Fatalf("test build: exit %d\n%s", r.Code, r.Stderr)
	}
}

// checkApprovalTrail: the audit log and the transparency log hold the
// request, both approvals (who approved which digest) and the signature.
func checkApprovalTrail(t *testing.T, w *approvalsWorld, digest string) {
	t.Helper()
	list := w.as(t, w.alice, "audit", "list", "--json")
	if list.Code != exitOK {
		t.Fatalf("audit list: %s", list.Stderr)
	}
	var steps []string
	for _, line := range strings.Split(strings.TrimSpace(list.Stdout), "\n") {
		var r struct {
			Outcome string `json:"outcome"`
			Caller  string `json:"caller"`
			SHA     string `json:"canonical_sha256"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		// One signed record per signature: the card may carry several
		// (one per canonical profile).
		if step := r.Outcome + " " + r.Caller; r.SHA == digest && (len(steps) == 0 || steps[len(steps)-1] != step) {
			steps = append(steps, step)
		}
	}
	want := []string{"approval.request " + w.pipelineID, "approval.approve " + w.aliceID, "approval.approve " + w.bobID, "signed " + w.pipelineID}
	if strings.Join(steps, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit records of the approved card:\n%s\nwant\n%s", strings.Join(steps, "\n"), strings.Join(want, "\n"))
	}
	// The log's leaves, authenticated against its signed checkpoint.
	resp, err := http.Get("http://" + w.http + transparency.KeyPath)
	if err != nil {
		t.Fatal(err)
	}
	keyText, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	keys, err := transparency.ParseVerifierKeys(string(keyText))
	if err != nil {
		t.Fatal(err)
	}
	lc := &tlogclient.Client{URL: "http://" + w.http + transparency.PathPrefix, Keys: keys}
	cp, err := lc.Checkpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	entries, err := lc.Entries(t.Context(), cp.Tree(), 0, cp.Size)
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	for _, b := range entries {
		e, err := transparency.ParseEntry(b)
		if err != nil {
			t.Fatal(err)
		}
		if step := e.Outcome + " " + e.Caller; e.Card.SHA256 == digest && (len(logged) == 0 || logged[len(logged)-1] != step) {
			logged = append(logged, step)
		}
	}
	if strings.Join(logged, "\n") != strings.Join(want, "\n") {
		t.Fatalf("transparency-log entries of the approved card:\n%s\nwant\n%s", strings.Join(logged, "\n"), strings.Join(want, "\n"))
	}
}
