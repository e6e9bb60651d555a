//go:build !noazurekv

package azurekv

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends/azurekv/azurekvfake"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// The tests drive the real Azure SDK (azkeys, and azidentity's managed
// identity credential) against azurekvfake, an in-process Key Vault with
// real keys over HTTPS on loopback, and its App Service token endpoint.

// env is a fake vault and a backend talking to it.
type env struct {
	fake *azurekvfake.Server
	b    *Backend
	logs *testsupport.SyncBuffer
}

// newEnv starts a fake with opts and a backend for cfg, with the
// managed-identity environment of the fake and an identity of its own
// (MSAL's token cache is process-wide).
func newEnv(t *testing.T, cfg Config, opts azurekvfake.Options) *env {
	t.Helper()
	fake, err := azurekvfake.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	t.Setenv("IDENTITY_ENDPOINT", fake.IdentityEndpoint())
	t.Setenv("IDENTITY_HEADER", fake.IdentityHeader())
	t.Setenv("IDENTITY_SERVER_THUMBPRINT", "") // else MSAL would pick Service Fabric
	e := &env{fake: fake, logs: &testsupport.SyncBuffer{}}
	e.b = e.newBackend(t, cfg)
	return e
}

// newBackend makes a backend on the fake; at cleanup its log must hold
// no identity header.
func (e *env) newBackend(t *testing.T, cfg Config) *Backend {
	t.Helper()
	if cfg.AllowedHosts == nil {
		cfg.AllowedHosts = []string{e.fake.Host()}
	}
	cfg.Credential = "managed"
	if cfg.ManagedIdentityClientID == "" {
		cfg.ManagedIdentityClientID = freshIdentity()
	}
	cfg.HTTPClient = e.fake.HTTPClient()
	cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		_ = b.Close()
		if strings.Contains(e.logs.String(), e.fake.IdentityHeader()) {
			t.Errorf("the log contains the identity header:\n%s", e.logs.String())
		}
	})
	return b
}

// key makes a key version in the fake and returns its URI.
func (e *env) key(t *testing.T, name, kty, crvOrSize string) string {
	t.Helper()
	v, err := e.fake.CreateKey(name, kty, crvOrSize)
	if err != nil {
		t.Fatal(err)
	}
	return keyURI(e.fake.Host(), name, v, "")
}

// freshIdentity is a user-assigned identity no other test used.
func freshIdentity() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "test-" + hex.EncodeToString(b)
}
