package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
