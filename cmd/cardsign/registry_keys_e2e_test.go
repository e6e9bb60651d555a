package main

import (
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

// TestRegistryThroughKeyEvents: a registered card keeps verifying, with
// cardsign verify and with @a2a-js/sdk, through the rotation, the activation
// and the retirement (to expiry) of its original key, and after a pending key
// is revoked no registered card carries it.
func TestRegistryThroughKeyEvents(t *testing.T) {
	clearConnEnv(t)
	clearIDTokenEnv(t)
	dir := t.TempDir()
	d := runDaemon(t, daemonBin, filepath.Join(dir, "data"), "limits:\n  rate: 0\nkeys:\n  retire_grace: 3s\njwks:\n  max_age: 1s\n")
	srv := func(args ...string) []string { return append(args, "--server", d.grpc) }
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
