package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"testing"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/registry/catalog"
	"github.com/cardsign/cardsign/store"
)

// BenchmarkServe serves each published document as cardsignd does (the
// HTTP listener's handler, NewHTTPHandler, mux and counters included), a
// full answer (200) and a revalidation (304, If-None-Match), from an
// authority publishing an AI Catalog, with one registered public card and
// a transparency log. Each is compared with BenchmarkBareHandler, and over
// the network with a bare net/http handler by scripts/bench; the 200 and
// 304 paths allocate nothing but what net/http's routing does.
// Run: go test -run '^$' -bench Serve -benchmem ./server
func BenchmarkServe(b *testing.B) {
	dir := b.TempDir()
	a := newAuthorityWith(b, openStore(b, dir), dir, slog.New(slog.DiscardHandler), func(c *Config) {
		c.Catalog = catalog.Settings{Domain: "agents.example.com"}
	})
	card := bytes.Replace(registryCardB(b), []byte(`"name": "Secure Agent"`), []byte(`"name": "Secure Agent bench"`), 1)
	if _, err := a.Sign(b.Context(), SignRequest{Card: card, Caller: "token:release", RequestID: "reg-bench",
		Identity: access.Identity{Name: "token:release"}, Registration: &Registration{AgentID: "bench", Visibility: store.Public}}); err != nil {
		b.Fatal(err)
	}
	if err := a.dutyRound(b.Context()); err != nil { // signs the catalog
		b.Fatal(err)
	}
	h := NewHTTPHandler(a, HTTPOptions{})
	for _, doc := range []struct{ name, path string }{
		{"jwks", "/.well-known/jwks.json"},
		{"revocations", "/.well-known/cardsign-revocations.json"},
		{"card", "/agents/bench/agent-card.json"},
		{"catalog", "/.well-known/ai-catalog.json"},
		{"did", "/.well-known/did.json"},
		{"checkpoint", "/log/checkpoint"},
	} {
		_, etag := benchDocument(b, h, doc.path)
		b.Run(doc.name+"/200", func(b *testing.B) { runHandler(b, h, doc.path, "", http.StatusOK) })
		b.Run(doc.name+"/304", func(b *testing.B) { runHandler(b, h, doc.path, etag, http.StatusNotModified) })
	}
}
