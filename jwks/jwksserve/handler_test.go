package jwksserve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/jwks/jwksfetch"
)

// response is what a handler test checks; headers absent from want are
// not checked, "" means the header must be absent.
type response struct {
	status  int
	headers map[string]string
	body    string
}

func check(t *testing.T, name string, h http.Handler, method string, reqHeaders map[string][]string, want response) {
	t.Helper()
	req := httptest.NewRequest(method, "/.well-known/x", nil)
	for k, vs := range reqHeaders {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != want.status {
		t.Errorf("%s: status %d, want %d", name, rec.Code, want.status)
	}
	for k, v := range want.headers {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", name, k, got, v)
		}
	}
	if got := rec.Body.String(); got != want.body {
		t.Errorf("%s: body %q, want %q", name, got, want.body)
	}
}

func TestHandler(t *testing.T) {
	doc := renderRotation(t, at(rotT-time.Hour-90*time.Second-500*time.Millisecond))
	if doc.MaxAge != 90*time.Second+500*time.Millisecond {
		t.Fatalf("MaxAge = %v", doc.MaxAge)
	}
	body := string(doc.Body)
	h := Handler(func(context.Context) (jwks.Document, error) { return doc, nil })
	ok := map[string]string{
		"Content-Type":                jwks.MediaType,
		"ETag":                        doc.ETag,
		"Cache-Control":               "public, max-age=90", // rounded down: never past the transition
		"Access-Control-Allow-Origin": "*",
		"Content-Length":              strconv.Itoa(len(doc.Body)),
	}
	notModified := map[string]string{
		"ETag":                        doc.ETag,
		"Cache-Control":               "public, max-age=90",
		"Access-Control-Allow-Origin": "*",
		"Content-Type":                "",
	}
	inm := func(v ...string) map[string][]string { return map[string][]string{"If-None-Match": v} }
	tests := []struct {
		name    string
		method  string
		headers map[string][]string
		want    response
	}{
		{"GET", http.MethodGet, nil, response{200, ok, body}},
		{"HEAD has headers, no body", http.MethodHead, nil, response{200, ok, ""}},
		{"If-None-Match match", http.MethodGet, inm(doc.ETag), response{304, notModified, ""}},
		{"If-None-Match in a list", http.MethodGet, inm(`"old", ` + doc.ETag), response{304, notModified, ""}},
		{"If-None-Match on a second line", http.MethodGet, inm(`"old"`, doc.ETag), response{304, notModified, ""}},
		{"If-None-Match star", http.MethodGet, inm("*"), response{304, notModified, ""}},
		{"If-None-Match weak form", http.MethodGet, inm("W/" + doc.ETag), response{304, notModified, ""}},
		{"HEAD with If-None-Match", http.MethodHead, inm(doc.ETag), response{304, notModified, ""}},
		{"If-None-Match other tag", http.MethodGet, inm(`"other"`), response{200, ok, body}},
		{"If-None-Match unquoted tag", http.MethodGet, inm(strings.Trim(doc.ETag, `"`)), response{200, ok, body}},
		{"POST", http.MethodPost, nil, response{405, map[string]string{"Allow": "GET, HEAD", "ETag": ""}, "method not allowed\n"}},
		{"DELETE", http.MethodDelete, nil, response{405, map[string]string{"Allow": "GET, HEAD"}, "method not allowed\n"}},
	}
	for _, tt := range tests {
		check(t, tt.name, h, tt.method, tt.headers, tt.want)
	}
}

func TestHandlerSourceError(t *testing.T) {
	secret := "open /var/lib/cardsign/store.db?pin=1234: permission denied"
	calls := 0
	h := Handler(func(ctx context.Context) (jwks.Document, error) {
		calls++
		if ctx == nil {
			t.Error("nil context")
		}
		return jwks.Document{}, errors.New(secret)
	})
	check(t, "source error", h, http.MethodGet, nil, response{503,
		map[string]string{"Cache-Control": "no-store", "ETag": "", "Content-Type": "text/plain; charset=utf-8"},
		"JWKS temporarily unavailable\n"})
	check(t, "POST does not reach source", h, http.MethodPost, nil, response{405, nil, "method not allowed\n"})
	if calls != 1 {
		t.Errorf("source called %d times, want 1", calls)
	}
}

func TestHandlerMaxAge(t *testing.T) {
	for _, tt := range []struct {
		maxAge time.Duration
		want   string
	}{
		{0, "public, max-age=0"},
		{999 * time.Millisecond, "public, max-age=0"},
		{time.Hour, "public, max-age=3600"},
		{-time.Second, "public, max-age=0"},
	} {
		doc := jwks.Document{Body: []byte(`{"keys":[]}`), MaxAge: tt.maxAge}
		h := Handler(func(context.Context) (jwks.Document, error) { return doc, nil })
		check(t, tt.want, h, http.MethodGet, nil, response{200, map[string]string{
			"Cache-Control": tt.want,
			"ETag":          jwks.ETagOf(doc.Body), // computed when the jwks.Document has none
		}, `{"keys":[]}`})
	}
}

// TestHandlerOverHTTP goes through a real server, where HEAD handling and
// Content-Length are net/http's as much as ours.
func TestHandlerOverHTTP(t *testing.T) {
	doc := renderRotation(t, at(rotT))
	srv := httptest.NewServer(Handler(func(context.Context) (jwks.Document, error) { return doc, nil }))
	defer srv.Close()
	c := srv.Client()

	resp, err := c.Head(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) != 0 || resp.ContentLength != int64(len(doc.Body)) {
		t.Errorf("HEAD: %d, %d body bytes, Content-Length %d", resp.StatusCode, len(b), resp.ContentLength)
	}

	set, err := jwksfetch.Load(context.Background(), srv.URL, c)
	if err != nil {
		t.Fatalf("Load from Handler: %v", err)
	}
	if len(set.Keys) != 2 {
		t.Errorf("served %d keys, want 2", len(set.Keys))
	}

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("If-None-Match", doc.ETag)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified || len(b) != 0 {
		t.Errorf("conditional GET: %d with %d body bytes", resp.StatusCode, len(b))
	}
}
