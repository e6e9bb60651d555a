package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/jwks/jwksserve"
)

// TestDocumentsServedWhileStoreDown: with PostgreSQL stopped, the JWKS and
// the revocation document are served from the last read (the same bytes),
// with a Cache-Control that does not outlive them, /readyz says signing
// stopped but documents are served, and /readyz/documents stays 200 until
// the bounds pass.
func TestDocumentsServedWhileStoreDown(t *testing.T) {
	ctx := t.Context()
	c, st := ownPostgres(t)
	a := newAuthorityOn(t, st, t.TempDir())
	a.docs.jwksMaxAge = 24 * time.Hour
	a.docs.revocationTTL = 2 * time.Hour // the bound of a JWKS served from the last read
	// A pending key activates in an hour: a scheduled transition.
	if _, err := a.admin.RotateKey(ctx, "", durationPtr(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); a.CheckReadiness(ctx) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not ready on a running database: %v", a.CheckReadiness(ctx))
		}
	}
	h := NewHTTPHandler(a, HTTPOptions{})
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	maxAge := func(rec *httptest.ResponseRecorder) time.Duration {
		t.Helper()
		v, ok := strings.CutPrefix(rec.Header().Get("Cache-Control"), "public, max-age=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			t.Fatalf("Cache-Control %q", rec.Header().Get("Cache-Control"))
		}
		return time.Duration(n) * time.Second
	}
	jwksUp, revUp := get(jwks.JWKSPath), get(jwks.RevocationsPath)
	if jwksUp.Code != http.StatusOK || revUp.Code != http.StatusOK {
		t.Fatalf("documents with the database up: %d %d", jwksUp.Code, revUp.Code)
	}
	if rec := get(DocumentsReadyPath); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "last read") {
		t.Fatalf("%s with the database up: %d %s", DocumentsReadyPath, rec.Code, rec.Body)
	}

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Both documents are due for a re-read now (as after their refresh
	// period, without waiting for it).
	a.keys.invalidate()
	a.revocations.Forget()
	rec := get(jwks.JWKSPath)
	if rec.Code != http.StatusOK || rec.Body.String() != jwksUp.Body.String() || rec.Header().Get("Etag") != jwksUp.Header().Get("Etag") {
		t.Fatalf("JWKS with the database stopped: %d %s", rec.Code, rec.Body)
	}
	if got := maxAge(rec); got <= 0 || got > time.Hour {
		t.Fatalf("JWKS max-age %s with the database stopped: not past the pending key's activation in an hour", got)
	}
	rec = get(jwks.RevocationsPath)
	if rec.Code != http.StatusOK || rec.Body.String() != revUp.Body.String() || rec.Header().Get("Cache-Control") != jwksserve.RevocationCacheControl {
		t.Fatalf("revocation document with the database stopped: %d %s %q", rec.Code, rec.Body, rec.Header().Get("Cache-Control"))
	}
	rec = get("/readyz")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "store unavailable") || !strings.Contains(rec.Body.String(), DocumentsReadyPath) {
		t.Fatalf("/readyz with the database stopped: %d %s", rec.Code, rec.Body)
	}
	rec = get(DocumentsReadyPath)
	var body struct {
		Status string
		JWKS   struct{ State string } `json:"jwks"`
		Revs   struct{ State string } `json:"revocations"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusOK || body.JWKS.State != "last read" || body.Revs.State != "last read" {
		t.Fatalf("%s with the database stopped: %d %s", DocumentsReadyPath, rec.Code, rec.Body)
	}

	// The bound: half an hour after the last read, however far the next
	// transition is.
	a.docs.revocationTTL = 30 * time.Minute
	a.keys.invalidate()
	if got := maxAge(get(jwks.JWKSPath)); got <= 0 || got > 30*time.Minute {
		t.Fatalf("JWKS max-age %s: past the bound of half an hour after the last read", got)
	}
	// Past the bound, and past the revocation document's exp: 503, not
	// an outdated document.
	a.docs.revocationTTL = time.Nanosecond
	a.keys.invalidate()
	if rec := get(jwks.JWKSPath); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("JWKS past its bound: %d", rec.Code)
	}
	// The clock past the document's exp (revocations.ttl is an hour).
	later := a.now().Add(2 * time.Hour)
	a.setClock(func() time.Time { return later })
	a.revocations.Forget()
	if rec := get(jwks.RevocationsPath); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("revocation document past its exp: %d", rec.Code)
	}
	if rec := get(DocumentsReadyPath); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%s with no document to serve: %d %s", DocumentsReadyPath, rec.Code, rec.Body)
	}
}
