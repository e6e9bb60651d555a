//go:build !novault

package hashivault

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends/hashivault/vaultfake"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// The tests drive the real OpenBao API client against vaultfake, an
// in-process Vault with real Transit keys, over loopback HTTP. Each test
// starts its own fake.

// env is a fake Vault and a backend talking to it.
type env struct {
	fake *vaultfake.Server
	b    *Backend
	logs *testsupport.SyncBuffer
}

// newEnv starts a fake with opts and a backend for cfg pointed at it,
// logging in with the root token unless cfg.Auth says otherwise. At
// cleanup the backend's log must hold none of the fake's tokens.
func newEnv(t testing.TB, cfg Config, opts vaultfake.Options) *env {
	t.Helper()
	fake, err := vaultfake.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	e := &env{fake: fake, logs: &testsupport.SyncBuffer{}}
	cfg.Address = fake.URL()
	if cfg.Auth.Method == "" && cfg.Auth.Token == "" {
		cfg.Auth.Token = fake.RootToken()
	}
	cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.b = e.newBackend(t, cfg)
	return e
}

// newBackend makes another backend on the same fake.
func (e *env) newBackend(t testing.TB, cfg Config) *Backend {
	t.Helper()
	if cfg.Address == "" {
		cfg.Address = e.fake.URL()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		_ = b.Close()
		for _, secret := range append([]string{e.fake.RootToken(), cfg.Auth.Token, cfg.Auth.SecretID}, loggedSecrets...) {
			if len(secret) >= 6 && strings.Contains(e.logs.String(), secret) { // shorter ones are test stand-ins
				t.Errorf("the log contains a secret (%.6s…):\n%s", secret, e.logs.String())
			}
		}
	})
	return b
}

// key creates a Transit key of typ in the fake.
func (e *env) key(t testing.TB, name, typ string) {
	t.Helper()
	if err := e.fake.CreateKey(name, typ); err != nil {
		t.Fatal(err)
	}
}

// loggedSecrets are secrets the tests hand the fake that no log may hold:
// the service account token of the Kubernetes login, the AppRole secrets.
var loggedSecrets = []string{"eyJhbGciOiJSUzI1NiJ9.sa-token.sig", "secret-1", "wrong-secret"}
