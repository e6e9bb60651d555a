package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAgentsRegistry: a card signed with --register is kept, listed, shown,
// served over HTTP and pulled into a file exactly as signed; versions and
// removal go through the CLI.
func TestAgentsRegistry(t *testing.T) {
	clearConnEnv(t)
	clearIDTokenEnv(t)
	dir := t.TempDir()
	d := runDaemon(t, daemonBin, filepath.Join(dir, "data"), "limits:\n  rate: 0\n")
	card := filepath.Join(repoRoot, "testdata/cards/security.json")
	srv := func(args ...string) []string { return append(args, "--server", d.grpc) }

	first := mustRun(t, dir, srv("sign", "--register", "--agent", "payments", "--visibility", "public", card)...)
	if !strings.Contains(first.Stderr, "registered as agent payments, version 1") {
		t.Fatalf("sign --register: %s", first.Stderr)
	}
	derived := mustRun(t, dir, srv("sign", "--register", card)...)
	if !strings.Contains(derived.Stderr, "registered as agent secure.example.com-a2a, version 1") {
		t.Fatalf("sign --register without --agent: %s", derived.Stderr)
	}
	second := mustRun(t, dir, srv("sign", "--register", "--agent", "payments", card)...)

	list := mustRun(t, dir, srv("agents", "list")...).Stdout
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "payments  version 2  public") || !strings.HasPrefix(lines[1], "secure.example.com-a2a  version 1  private") {
		t.Fatalf("agents list:\n%s", list)
	}
	if show := mustRun(t, dir, srv("agents", "show", "payments")...).Stdout; show != second.Stdout {
		t.Fatalf("agents show differs from what sign returned:\n%s\n%s", show, second.Stdout)
	}
	if v1 := mustRun(t, dir, srv("agents", "show", "payments", "--version", "1")...).Stdout; v1 != first.Stdout {
		t.Fatal("agents show --version 1 differs from the first signed card")
	}
	if hist := mustRun(t, dir, srv("agents", "history", "payments")...).Stdout; strings.Count(hist, "\n") != 2 || !strings.HasPrefix(hist, "payments  version 2") {
		t.Fatalf("agents history:\n%s", hist)
	}

	out := filepath.Join(dir, "www", "agent-card.json")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, dir, srv("agents", "pull", "payments", "--out", out)...); !strings.Contains(r.Stderr, "written") {
		t.Fatalf("agents pull: %s", r.Stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != second.Stdout {
		t.Fatal("the pulled file differs from the signed card")
	}
	if r := mustRun(t, dir, srv("agents", "pull", "payments", "--out", out)...); !strings.Contains(r.Stderr, "unchanged") {
		t.Fatalf("agents pull again: %s", r.Stderr)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, "www", ".*tmp*")); len(tmp) != 0 {
		t.Fatalf("pull left temporary files: %v", tmp)
	}

	resp, err := http.Get("http://" + d.http + "/agents/payments/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(body, []byte(second.Stdout)) {
		t.Fatalf("GET the public card: %d", resp.StatusCode)
	}
	if v := cardsign(t, dir, body, "verify", "--jwks", "http://"+d.http+"/.well-known/jwks.json", "-"); v.Code != 0 {
		t.Fatalf("the served card does not verify: %s", v.Stderr)
	}

	mustRun(t, dir, srv("agents", "remove", "payments")...)
	if r := cardsign(t, dir, nil, srv("agents", "show", "payments")...); r.Code == 0 || !strings.Contains(r.Stderr, "not found") {
		t.Fatalf("agents show after remove: exit %d, %s", r.Code, r.Stderr)
	}
	if resp, err := http.Get("http://" + d.http + "/agents/payments/agent-card.json"); err != nil || resp.StatusCode != 404 {
		t.Fatalf("GET a removed agent's card: %v %v", resp.StatusCode, err)
	}
	if r := cardsign(t, dir, nil, srv("sign", "--register", "--agent", "Not/An/Id", card)...); r.Code == 0 || !strings.Contains(r.Stderr, "agent id") {
		t.Fatalf("sign --register with a bad id: exit %d, %s", r.Code, r.Stderr)
	}
	if r := cardsign(t, dir, nil, "sign", "--key", "file:nope.pem", "--register", card); r.Code != exitUsage || !strings.Contains(r.Stderr, "need --server") {
		t.Fatalf("sign --register offline: exit %d, %s", r.Code, r.Stderr)
	}
}

// TestAgentsRevokeCard: a revoked card is refused by cardsign verify (from the
// signed revocation document) while a sibling signed by the same key
// verifies, and the registry serves it as gone.
func TestAgentsRevokeCard(t *testing.T) {
	clearConnEnv(t)
	clearIDTokenEnv(t)
	dir := t.TempDir()
	d := runDaemon(t, daemonBin, filepath.Join(dir, "data"), "limits:\n  rate: 0\n")
	srv := func(args ...string) []string { return append(args, "--server", d.grpc) }
	jwksURL := "http://" + d.http + "/.well-known/jwks.json"
	payments := mustRun(t, dir, srv("sign", "--register", "--agent", "payments", "--visibility", "public", filepath.Join(repoRoot, "testdata/cards/security.json"))...).Stdout
	billing := mustRun(t, dir, srv("sign", "--register", "--agent", "billing", "--visibility", "public", filepath.Join(repoRoot, "testdata/cards/unicode.json"))...).Stdout
	writeFile(t, filepath.Join(dir, "payments.json"), []byte(payments))
	writeFile(t, filepath.Join(dir, "billing.json"), []byte(billing))
	mustRun(t, dir, "verify", "--jwks", jwksURL, "payments.json")

	if r := cardsign(t, dir, nil, srv("agents", "revoke", "payments")...); r.Code != exitUsage || !strings.Contains(r.Stderr, "--reason") {
		t.Fatalf("revoke without a reason: exit %d %s", r.Code, r.Stderr)
	}
	rev := mustRun(t, dir, srv("agents", "revoke", "payments", "--reason", "leaked with a staging URL")...)
	if !strings.Contains(rev.Stdout, "revoked agent payments version 1") {
		t.Fatalf("agents revoke: %s", rev.Stdout)
	}
	// Issue 24 item 18: pull refuses to publish a revoked card (exit 1,
	// the file left alone) and says why, unless told to.
	out := filepath.Join(dir, "agent-card.json")
	if r := cardsign(t, dir, nil, srv("agents", "pull", "payments", "--out", out)...); r.Code != exitFail ||
		!strings.Contains(r.Stderr, "refusing to write "+out+": payments version 1 was revoked at ") || !strings.Contains(r.Stderr, ": leaked with a staging URL; ") {
		t.Fatalf("agents pull of a revoked card: exit %d, want %d\n%s", r.Code, exitFail, r.Stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("agents pull wrote the revoked card: %v", err)
	}
	if r := mustRun(t, dir, srv("agents", "pull", "payments", "--out", out, "--allow-revoked")...); !strings.Contains(r.Stderr, "warning: payments version 1 was revoked") || !strings.Contains(r.Stderr, "written") {
		t.Fatalf("agents pull --allow-revoked: %s", r.Stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != payments {
		t.Fatal("agents pull --allow-revoked: the file is not the card")
	}
	if r := mustRun(t, dir, srv("agents", "show", "payments")...); r.Stdout != payments || !strings.Contains(r.Stderr, "note: payments version 1 was revoked") {
		t.Fatalf("agents show of a revoked card: %s", r.Stderr)
	}
	if r := cardsign(t, dir, nil, srv("agents", "pull", "billing", "--out", filepath.Join(dir, "billing-pulled.json"))...); r.Code != exitOK {
		t.Fatalf("agents pull of a card that is not revoked: exit %d %s", r.Code, r.Stderr)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := cardsign(t, dir, nil, "verify", "--jwks", jwksURL, "payments.json")
		if r.Code != 0 {
			if !strings.Contains(r.Stdout, "card revoked: agent payments version 1") || !strings.Contains(r.Stdout, "leaked with a staging URL") {
				t.Fatalf("the revoked card is refused without saying why:\n%s%s", r.Stdout, r.Stderr)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the revoked card still verifies 30s after the revocation")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := cardsign(t, dir, nil, "verify", "--jwks", jwksURL, "billing.json"); r.Code != 0 {
		t.Fatalf("a sibling card by the same key no longer verifies: %s%s", r.Stdout, r.Stderr)
	}
	resp, err := http.Get("http://" + d.http + "/agents/payments/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGone {
		t.Fatalf("GET the revoked card: %d, want 410", resp.StatusCode)
	}
}
