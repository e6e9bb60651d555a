package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/cardsign/cardsign/transparency"
)

// TestLogMonitorWebhook: log monitor --webhook sends each match and alarm
// as a CloudEvent signed as cardsignd's webhooks are (verified here with the
// Standard Webhooks reference library). A match the webhook does not take
// fails the run before the state file moves, so the next run sends it
// again with the same id; an alarm is raised (exit 3) whatever the webhook
// does.
func TestLogMonitorWebhook(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if r := runCLI(t, "events", "secret", "--out", secretFile); r.Code != exitOK {
		t.Fatalf("events secret: %d %s", r.Code, r.Stderr)
	}
	secret, _ := os.ReadFile(secretFile)
	wh, err := standardwebhooks.NewWebhook(strings.TrimSpace(string(secret)))
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	var mu sync.Mutex
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if err := wh.Verify(body, r.Header); err != nil {
			t.Errorf("the reference library refuses the monitor's request: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev map[string]any
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("not JSON: %s", body)
		}
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}))
	defer srv.Close()
	received := func() []map[string]any { mu.Lock(); defer mu.Unlock(); return append([]map[string]any(nil), got...) }

	tl := newTestLog(t)
	tl.grow(t, 40, "")
	state := filepath.Join(dir, "monitor.json")
	monitor := func() result {
		return runCLI(t, "log", "monitor", "--url", tl.logURL(), "--log-key", tl.URL+transparency.KeyPath, "--state", state,
			"--watch", "payments-agent", "--webhook", srv.URL, "--webhook-secret-file", secretFile)
	}
	// Down: the matches are printed, the run fails, the state stays.
	down.Store(true)
	if r := monitor(); r.Code != exitFail || !strings.Contains(r.Stdout, "MATCH leaf 4") || !strings.Contains(r.Stderr, "the next run sends it again") {
		t.Fatalf("webhook down: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if _, err := os.Stat(state); err == nil {
		t.Fatal("the state file was written although the webhook did not take a match")
	}
	down.Store(false)
	if r := monitor(); r.Code != exitOK {
		t.Fatalf("webhook up: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	evs := received()
	if len(evs) != 1 || evs[0]["type"] != "dev.cardsign.monitor.match" || evs[0]["subject"] != "payments-agent" ||
		evs[0]["id"] != logOrigin+"/leaf/4" || evs[0]["data"].(map[string]any)["event"] != "entry" || evs[0]["source"] != tl.logURL() {
		t.Fatalf("the webhook got %v", evs)
	}
	// The log forks: the alarm is raised and sent; with the webhook down
	// it is raised all the same.
	fork := tl.Fork()
	if err := fork.Truncate(30); err != nil {
		t.Fatal(err)
	}
	appendEntries(t, fork, 20, "evil-")
	tl.show(fork)
	if r := monitor(); r.Code != exitAlarm {
		t.Fatalf("fork: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if evs := received(); len(evs) != 2 || evs[1]["type"] != "dev.cardsign.monitor.alarm" || !strings.Contains(evs[1]["id"].(string), "/alarm/") {
		t.Fatalf("after the fork the webhook got %v", evs)
	}
	down.Store(true)
	before, _ := os.ReadFile(state)
	if r := monitor(); r.Code != exitAlarm || !strings.Contains(r.Stdout, "ALARM") || !strings.Contains(r.Stderr, "--webhook") {
		t.Fatalf("fork, webhook down: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if after, _ := os.ReadFile(state); !bytes.Equal(before, after) {
		t.Fatal("the state file moved on an alarm")
	}
	if r := runCLI(t, "log", "monitor", "--url", tl.logURL(), "--log-key", tl.vkey, "--state", state, "--webhook", srv.URL); r.Code != exitUsage || !strings.Contains(r.Stderr, "--webhook-secret-file") {
		t.Fatalf("--webhook without a secret: %d %s", r.Code, r.Stderr)
	}
}
