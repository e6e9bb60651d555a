// Package servertest makes a signing authority for the tests of the
// packages that serve one (server/grpcapi, the external tests of server):
// an embedded store and file keys in a temporary directory, a first key
// active, and a transparency log.
package servertest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/transparency"
)

// New returns a bootstrapped authority and the directory it keeps its
// database and key files in (keys/). Both are closed when t ends.
func New(t testing.TB) (*server.Authority, string) {
	t.Helper()
	dir := t.TempDir()
	keyDir := filepath.Join(dir, "keys")
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "cardsign.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logKey, err := transparency.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	logSigner, err := transparency.NewSigner("test.example/log", logKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{KeyBackend: "file", KeyDir: keyDir, DefaultAlg: jose.ES256, Log: logSigner, AuditBatch: 64}
	cfg.Prepublish, cfg.RetireGrace = time.Hour, 24*time.Hour
	cfg.JWKSMaxAge, cfg.RevocationTTL = time.Hour, time.Hour
	a := server.NewAuthority(cfg, st, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { a.Close() })
	if _, err := a.Bootstrap(context.Background()); err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	return a, dir
}
