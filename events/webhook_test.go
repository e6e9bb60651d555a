package events

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// NewSecret makes a fresh Standard Webhooks secret.
func newSecret(t testing.TB) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// receiver is a webhook receiver that verifies every request with the
// Standard Webhooks reference library and records what it got.
type receiver struct {
	t  testing.TB
	wh *standardwebhooks.Webhook

	mu   sync.Mutex
	ids  []string
	body [][]byte
}

func newReceiver(t testing.TB, secret string) *receiver {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return &receiver{t: t, wh: wh}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := rc.wh.Verify(body, r.Header); err != nil {
		rc.t.Errorf("the reference library refuses the signature: %v (headers %v)", err, r.Header)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	rc.mu.Lock()
	rc.ids = append(rc.ids, r.Header.Get("webhook-id"))
	rc.body = append(rc.body, body)
	rc.mu.Unlock()
}

func messages(n int) []Message {
	recs, _ := sampleRecords()
	var out []Message
	for i := range n {
		out = append(out, testBuilder.Message(recs[i%len(recs)]))
	}
	return out
}

// TestWebhookSignedWithEverySecret: every request verifies with either
// secret (a rotation), one event per request or a batch per request.
func TestWebhookSignedWithEverySecret(t *testing.T) {
	old, next := newSecret(t), newSecret(t)
	for _, batch := range []int{0, 3} {
		for _, secret := range []string{old, next} {
			rc := newReceiver(t, secret)
			srv := httptest.NewServer(rc)
			w, err := NewWebhook(WebhookConfig{URL: srv.URL, Secrets: []string{old, next}, Batch: batch})
			if err != nil {
				t.Fatal(err)
			}
			msgs := messages(5)
			if n, err := w.Send(t.Context(), msgs); n != 5 || err != nil {
				t.Fatalf("batch %d: Send: %d, %v", batch, n, err)
			}
			rc.mu.Lock()
			want := 5
			if batch == 3 {
				want = 2
				if !strings.HasPrefix(string(rc.body[0]), "[") || rc.ids[0] != msgs[0].ID+"-"+msgs[2].ID {
					t.Fatalf("batch: id %s body %.40s", rc.ids[0], rc.body[0])
				}
			} else if rc.ids[0] != msgs[0].ID || string(rc.body[0]) != string(msgs[0].JSON) {
				t.Fatalf("one event per request: id %s body %s", rc.ids[0], rc.body[0])
			}
			if len(rc.ids) != want {
				t.Fatalf("batch %d: %d requests, want %d", batch, len(rc.ids), want)
			}
			rc.mu.Unlock()
			w.Close()
			srv.Close()
		}
	}
	// A receiver holding a third secret refuses.
	rc := newReceiver(t, newSecret(t))
	if err := rc.wh.Verify(messages(1)[0].JSON, http.Header{"Webhook-Id": {"x"}, "Webhook-Timestamp": {"1"}, "Webhook-Signature": {"v1,AAAA"}}); err == nil {
		t.Fatal("the reference library accepts a bad signature: the test cannot fail")
	}
}

// TestWebhookHostileReceivers: a slow receiver, an endless body, a
// redirect loop, 500s and throttling each end in an error within the
// timeout (never a hang), and what was delivered before is counted.
func TestWebhookHostileReceivers(t *testing.T) {
	secret := newSecret(t)
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    string
		sent    int // of 3, when the second request fails
	}{
		{"slow", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client go
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}, "context deadline exceeded|timeout awaiting response headers", 0},
		{"endless body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			chunk := []byte(strings.Repeat("x", 32<<10))
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, "", 3},
		{"redirect loop", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, r.URL.String(), http.StatusTemporaryRedirect)
		}, "redirects are not followed", 0},
		{"500", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom\x1b[2J", http.StatusInternalServerError)
		}, `answered 500 Internal Server Error: "boom\x1b[2J"`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			w, err := NewWebhook(WebhookConfig{URL: srv.URL, Secrets: []string{secret}, Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			start := time.Now()
			n, err := w.Send(t.Context(), messages(3))
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("Send took %s", took)
			}
			matches := false
			for _, w := range strings.Split(tc.want, "|") { // either of the timeouts, whichever fires first
				matches = matches || (err != nil && strings.Contains(err.Error(), w))
			}
			if n != tc.sent || (tc.want == "") != (err == nil) || (err != nil && !matches) {
				t.Fatalf("Send: %d, %v; want %d and an error with %q", n, err, tc.sent, tc.want)
			}
		})
	}
	t.Run("throttled", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		}))
		defer srv.Close()
		w, _ := NewWebhook(WebhookConfig{URL: srv.URL, Secrets: []string{secret}})
		_, err := w.Send(t.Context(), messages(1))
		var ra *RetryAfterError
		if !errors.As(err, &ra) || ra.After != 7*time.Second {
			t.Fatalf("429 with Retry-After: %v", err)
		}
	})
	t.Run("second request fails", func(t *testing.T) {
		var calls int
		var mu sync.Mutex
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			calls++
			c := calls
			mu.Unlock()
			if c == 2 {
				http.Error(w, "no", http.StatusBadGateway)
			}
		}))
		defer srv.Close()
		w, _ := NewWebhook(WebhookConfig{URL: srv.URL, Secrets: []string{secret}})
		if n, err := w.Send(context.Background(), messages(3)); n != 1 || err == nil {
			t.Fatalf("Send: %d, %v; want 1 delivered and the error", n, err)
		}
	})
}

func TestWebhookConfigRefusals(t *testing.T) {
	secret := newSecret(t)
	for _, tc := range []struct {
		cfg  WebhookConfig
		want string
	}{
		{WebhookConfig{URL: "http://siem.example.com/hook", Secrets: []string{secret}}, "http is only for a loopback receiver"},
		{WebhookConfig{URL: "ftp://127.0.0.1/", Secrets: []string{secret}}, "scheme is not https"},
		{WebhookConfig{URL: "https://u:p@siem.example.com/", Secrets: []string{secret}}, "no user"},
		{WebhookConfig{URL: "https://siem.example.com/"}, "no secret"},
		{WebhookConfig{URL: "https://siem.example.com/", Secrets: []string{"whsec_c2hvcnQ="}}, "shorter than 24 bytes"},
		{WebhookConfig{URL: "https://siem.example.com/", Secrets: []string{"whsec_" + strings.Repeat("!", 40)}}, "not whsec_ followed by standard base64"},
		{WebhookConfig{URL: "https://siem.example.com/", Secrets: []string{secret}, Batch: 101}, "at most 100"},
	} {
		_, err := NewWebhook(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg.URL, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), strings.TrimPrefix(secret, "whsec_")) {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false}, {"3", 3 * time.Second, true}, {"-1", 0, false}, {"soon", 0, false},
		{"Sun, 29 Nov 2026 10:00:30 GMT", 30 * time.Second, true}, {"Sun, 29 Nov 2026 09:00:00 GMT", 0, true},
	} {
		got, ok := retryAfter(tc.h, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %s, %v; want %s, %v", tc.h, got, ok, tc.want, tc.ok)
		}
	}
}
