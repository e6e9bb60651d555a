package catalog

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// TestHandlerHeadersFollow: the header values the handler keeps between
// requests follow the catalog: a max-age shrinking toward the earliest
// expiresAt, and a new catalog's tag and length at the next request.
func TestHandlerHeadersFollow(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	activate := t0.Add(-time.Hour)
	now := t0
	earliest := t0.Add(24 * time.Hour)
	stored := func(body string) store.Document {
		meta, err := json.Marshal(catalogState{KID: "cat", Earliest: earliest})
		if err != nil {
			t.Fatal(err)
		}
		return store.Document{Name: DocumentName, Seq: 1, Body: []byte(body), Meta: meta}
	}
	st := &docStore{doc: stored("{}\n")}
	pub := New(Config{
		Store:    st,
		Keys:     &fixedKeys{recs: []jwks.KeyRecord{{KID: "cat", Alg: jose.ES256, ActivateAt: &activate}}},
		Registry: noRevokedCards{},
		Now:      func() time.Time { return now },
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Wake:     func() {},
	})
	h := NewHandler(pub, time.Hour, func() time.Time { return now })
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/ai-catalog.json", nil))
		return rec
	}
	for _, step := range []struct {
		name   string
		change func()
		maxAge int
		body   string
	}{
		{"first", func() {}, 3600, "{}\n"},
		{"again", func() {}, 3600, "{}\n"},
		{"90 s before the earliest expiresAt", func() { now = earliest.Add(-90 * time.Second) }, 90, "{}\n"},
		{"a new catalog", func() { st.doc = stored(`{"n":2}` + "\n"); pub.Forget() }, 90, `{"n":2}` + "\n"},
	} {
		step.change()
		rec := get()
		want := map[string]string{
			"Cache-Control":  "public, max-age=" + strconv.Itoa(step.maxAge),
			"ETag":           jwks.ETagOf([]byte(step.body)),
			"Content-Length": strconv.Itoa(len(step.body)),
		}
		if rec.Code != 200 || rec.Body.String() != step.body {
			t.Fatalf("%s: %d %q", step.name, rec.Code, rec.Body)
		}
		for k, v := range want {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("%s: %s %q, want %q", step.name, k, got, v)
			}
		}
	}
}
