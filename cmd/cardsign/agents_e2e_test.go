package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAgentsRegistry: a card signed with --register is kept, listed, shown,
// served over HTTP and pulled into a file exactly as signed; versions and
// removal go through the CLI.
func TestAgentsRegistry(t *testing.T) {
	dir, d, srv := registryDaemon(t, "limits:\n  rate: 0\n")
	card := filepath.Join(repoRoot, "testdata/cards/security.json")

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
	dir, d, srv := registryDaemon(t, "limits:\n  rate: 0\n")
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

// TestRegistryThroughKeyEvents: a registered card keeps verifying, with
// cardsign verify and with @a2a-js/sdk, through the rotation, the activation
// and the retirement (to expiry) of its original key, and after a pending key
// is revoked no registered card carries it.
func TestRegistryThroughKeyEvents(t *testing.T) {
	dir, d, srv := registryDaemon(t, "limits:\n  rate: 0\nkeys:\n  retire_grace: 3s\njwks:\n  max_age: 1s\n")
	jwksURL := "http://" + d.http + "/.well-known/jwks.json"
	card := filepath.Join(repoRoot, "testdata/cards/security.json")
	mustRun(t, dir, srv("sign", "--register", "--agent", "payments", "--visibility", "public", card)...)

	kidsNow := func() []string {
		t.Helper()
		var a struct {
			Kids []string `json:"kids"`
		}
		out := mustRun(t, dir, srv("agents", "list", "--json")...).Stdout
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &a); err != nil {
			t.Fatalf("agents list --json: %q: %v", out, err)
		}
		slices.Sort(a.Kids)
		return a.Kids
	}
	waitKids := func(step string, want ...string) {
		t.Helper()
		slices.Sort(want)
		deadline := time.Now().Add(30 * time.Second)
		for !slices.Equal(kidsNow(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the registered card carries %v after 30s, want %v", step, kidsNow(), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// verifyEverywhere pulls the served card and verifies it against the
	// JWKS served now, with cardsign and with @a2a-js/sdk.
	verifyEverywhere := func(step string) {
		t.Helper()
		cardPath := filepath.Join(dir, "card.json")
		mustRun(t, dir, srv("agents", "pull", "payments", "--out", cardPath)...)
		resp, err := http.Get(jwksURL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		jwksFile := filepath.Join(dir, "jwks.json")
		if err := os.WriteFile(jwksFile, body, 0o644); err != nil {
			t.Fatal(err)
		}
		if r := cardsign(t, dir, nil, "verify", "--jwks", jwksFile, cardPath); r.Code != 0 {
			t.Fatalf("%s: cardsign verify: %s", step, r.Stderr)
		}
		if res := verifyJS(t, jwksFile, cardPath); !res[cardPath].OK {
			t.Fatalf("%s: @a2a-js/sdk: %s", step, res[cardPath].Error)
		}
	}
	firstKids := kidsNow()
	if len(firstKids) != 1 {
		t.Fatalf("registered card carries %v", firstKids)
	}
	k1 := firstKids[0]
	verifyEverywhere("registered")

	rot := mustRun(t, dir, srv("keys", "rotate", "--prepublish", "1h")...).Stdout
	k2 := strings.Fields(strings.Split(rot, "\n")[1])[0]
	waitKids("rotation", k1, k2)
	verifyEverywhere("rotation (k2 pending)")

	mustRun(t, dir, srv("keys", "activate", "--", k2)...)
	waitKids("activation", k2)
	verifyEverywhere("activation (k1 retired)")

	// k1 expires retire_grace after the card stopped carrying it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(jwksURL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), k1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("k1 still published 30s after retirement (retire_grace 3s)")
		}
		time.Sleep(200 * time.Millisecond)
	}
	verifyEverywhere("retirement of k1 (expired)")

	rot = mustRun(t, dir, srv("keys", "rotate", "--prepublish", "1h")...).Stdout
	k3 := strings.Fields(strings.Split(rot, "\n")[1])[0]
	waitKids("second rotation", k2, k3)
	mustRun(t, dir, srv("keys", "revoke", "--reason", "test: compromised", "--", k3)...)
	waitKids("revocation of k3", k2)
	verifyEverywhere("revocation of the pending k3")
}

// registryDaemon starts a daemon with config for a test that drives the
// registry through the CLI, with the environment's connection and ID-token
// settings cleared so that only the flags count. It returns the test's
// work folder, the daemon, and srv, which appends the daemon's --server
// to a command line.
func registryDaemon(t *testing.T, config string) (string, *daemonProcess, func(...string) []string) {
	t.Helper()
	clearConnEnv(t)
	clearIDTokenEnv(t)
	dir := t.TempDir()
	d := runDaemon(t, daemonBin, filepath.Join(dir, "data"), config)
	srv := func(args ...string) []string { return append(args, "--server", d.grpc) }
	return dir, d, srv
}
