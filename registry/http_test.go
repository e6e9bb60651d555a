package registry

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

// serve runs one request through h's routes, as the reader (a reader role)
// or not.
func serve(h *Handler, method, path string, header http.Header) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	mux.Handle(AgentCardPath, h.Card())
	mux.Handle(AgentLogSaltPath, h.Salt())
	r := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	return w
}

// readerHeader marks a request from a reader in these tests.
var readerHeader = http.Header{"Authorization": {"Bearer reader"}}

func testHandler(tr *testRegistry) *Handler {
	return NewHandler(tr.Registry, func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer reader" }, 5*time.Minute)
}

// TestCardHTTP: a public card to anyone, cacheable, with an ETag; a private
// one to a reader only, revalidated, and to anyone else the answer an
// unknown agent gets; a revoked card is gone.
func TestCardHTTP(t *testing.T) {
	tr := newTestRegistry(t, nil)
	h := testHandler(tr)
	pub, err := tr.register(t, "pub", store.Public, "token:a", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.register(t, "priv", store.Private, "token:a", "k1"); err != nil {
		t.Fatal(err)
	}
	w := serve(h, "GET", "/agents/pub/agent-card.json", nil)
	if w.Code != 200 || w.Body.String() != string(pub.Signed) || w.Header().Get("Cache-Control") != "public, max-age=300" || w.Header().Get("ETag") == "" {
		t.Fatalf("public card: %d %v %q", w.Code, w.Header(), w.Body)
	}
	etag := w.Header().Get("ETag")
	if w := serve(h, "GET", "/agents/pub/agent-card.json", http.Header{"If-None-Match": {etag}}); w.Code != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d, want 304", w.Code)
	}
	if w := serve(h, "HEAD", "/agents/pub/agent-card.json", nil); w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("HEAD: %d, %d bytes", w.Code, w.Body.Len())
	}
	unknown := serve(h, "GET", "/agents/nobody/agent-card.json", nil)
	hidden := serve(h, "GET", "/agents/priv/agent-card.json", nil)
	if unknown.Code != 404 || hidden.Code != 404 || unknown.Body.String() != hidden.Body.String() {
		t.Fatalf("private card to an anonymous caller: %d %q; unknown agent: %d %q; want the same 404", hidden.Code, hidden.Body, unknown.Code, unknown.Body)
	}
	w = serve(h, "GET", "/agents/priv/agent-card.json", readerHeader)
	if w.Code != 200 || w.Header().Get("Cache-Control") != "private, no-cache" || w.Header().Get("Vary") != "Authorization, Accept" {
		t.Fatalf("private card to a reader: %d %v", w.Code, w.Header())
	}
	if w := serve(h, "GET", "/agents/Bad%2FId/agent-card.json", nil); w.Code != 404 {
		t.Fatalf("a bad id: %d, want 404", w.Code)
	}
	if _, err := tr.Revoke(t.Context(), "pub", 0, "compromised", "token:admin"); err != nil {
		t.Fatal(err)
	}
	if w := serve(h, "GET", "/agents/pub/agent-card.json", nil); w.Code != http.StatusGone {
		t.Fatalf("revoked card: %d, want 410", w.Code)
	}
}

// TestCardWithoutRevokedSignatures: a card is served without the
// signatures of keys revoked since it was signed, and the duties are woken
// to sign it again; a card signed by revoked keys only is not served at all
// (503, retry) over HTTP, nor by Served.
func TestCardWithoutRevokedSignatures(t *testing.T) {
	tr := newTestRegistry(t, nil)
	h := testHandler(tr)
	if _, err := tr.register(t, "both", store.Public, "token:a", "k1", "k2"); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.register(t, "only", store.Public, "token:a", "k1"); err != nil {
		t.Fatal(err)
	}
	tr.keys.signing, tr.keys.revoked = []string{"k2"}, []string{"k1"}
	w := serve(h, "GET", "/agents/both/agent-card.json", nil)
	if w.Code != 200 {
		t.Fatalf("card signed by k1 and k2, k1 revoked: %d %q", w.Code, w.Body)
	}
	var doc struct {
		Signatures []struct{ Protected string } `json:"signatures"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || len(doc.Signatures) != 1 {
		t.Fatalf("served signatures: %+v, %v; want k2's only", doc, err)
	}
	if h, err := base64.RawURLEncoding.DecodeString(doc.Signatures[0].Protected); err != nil || !strings.Contains(string(h), `"kid":"k2"`) {
		t.Fatalf("served signature's header %s, %v; want k2's", h, err)
	}
	c, err := tr.Card(t.Context(), "both", 0)
	if err != nil {
		t.Fatal(err)
	}
	if c, err = tr.Served(t.Context(), c); err != nil || !slices.Equal(c.KIDs, []string{"k2"}) {
		t.Fatalf("Served: kids %v, %v; want [k2]", c.KIDs, err)
	}
	w = serve(h, "GET", "/agents/only/agent-card.json", nil)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("card signed by the revoked key only: %d %v, want 503 with Retry-After", w.Code, w.Header())
	}
	if c, err = tr.Card(t.Context(), "only", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Served(t.Context(), c); err != ErrResigning {
		t.Fatalf("Served: %v, want ErrResigning", err)
	}
	if tr.wakes == 0 {
		t.Error("serving a card without revoked signatures did not wake the duties")
	}
}

// TestSaltHTTP: an agent's log salt to a reader, for any id; a 404 to
// anyone else, and without a log.
func TestSaltHTTP(t *testing.T) {
	tr := newTestRegistry(t, withLog)
	h := testHandler(tr)
	if w := serve(h, "GET", "/agents/anyone/log-salt", nil); w.Code != 404 {
		t.Fatalf("salt to an anonymous caller: %d, want 404", w.Code)
	}
	w := serve(h, "GET", "/agents/anyone/log-salt", readerHeader)
	var got struct {
		AgentID string `json:"agent_id"`
		Salt    string `json:"salt"`
		Sealed  bool   `json:"sealed"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != 200 || err != nil {
		t.Fatalf("salt to a reader: %d %q", w.Code, w.Body)
	}
	if got.AgentID != "anyone" || got.Salt != hex.EncodeToString(transparency.AgentSalt([]byte(testSecret), "anyone")) || !got.Sealed {
		t.Fatalf("salt: %+v", got)
	}
	nolog := testHandler(newTestRegistry(t, nil))
	if w := serve(nolog, "GET", "/agents/anyone/log-salt", readerHeader); w.Code != 404 || !strings.Contains(w.Body.String(), "no transparency log") {
		t.Fatalf("salt without a log: %d %q", w.Code, w.Body)
	}
}
