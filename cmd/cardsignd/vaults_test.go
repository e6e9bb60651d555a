package main

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/cardsign/cardsign/backends/azurekv/azurekvfake"
	"github.com/cardsign/cardsign/backends/hashivault/vaultfake"
	"github.com/cardsign/cardsign/internal/swtpmtest"
)

// azureFake starts a Key Vault fake and returns it with the environment a
// daemon needs to reach it: its managed-identity endpoint, and its CA in
// SSL_CERT_FILE (the vault is HTTPS, as Key Vault is; the SDK's transport
// trusts the system roots, which that variable names).
func azureFake(tb testing.TB, opts azurekvfake.Options) (*azurekvfake.Server, []string) {
	tb.Helper()
	fake, err := azurekvfake.Start(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fake.Close() })
	ca := filepath.Join(tb.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, fake.CACertPEM(), 0o600); err != nil {
		tb.Fatal(err)
	}
	return fake, append(os.Environ(), "IDENTITY_ENDPOINT="+fake.IdentityEndpoint(), "IDENTITY_HEADER="+fake.IdentityHeader(),
		"IDENTITY_SERVER_THUMBPRINT=", "SSL_CERT_FILE="+ca)
}

// azureConfig is a daemon config whose keys are versions of one Key Vault
// key in fake.
func azureConfig(fake *azurekvfake.Server, extra string) string {
	return fmt.Sprintf("keys:\n  backend: azurekv\n%sazurekv:\n  key: azurekv://%s/keys/agent-cards\n  allowed_hosts: [%q]\n  credential: managed\n  rate_limit: 100000\n",
		extra, fake.Host(), fake.Host())
}

// TestDaemonAzureKV: keys made, rotated, registered cards re-signed and a
// revoked key disabled in Key Vault, through cardsignd.
func TestDaemonAzureKV(t *testing.T) {
	fake, env := azureFake(t, azurekvfake.Options{})
	kmsLifecycle(t, env, azureConfig(fake, "  on_revoke: disable\n"), func(uri string) bool {
		return !fake.Enabled("agent-cards", path.Base(uri))
	}, nil)
}

// vaultFake starts a Vault fake with a least-privilege policy for
// cardsignd (docs/keys.md), an AppRole holding it, and an Ed25519 log key,
// and returns it with the secret ID file and the log key's public key.
func vaultFake(tb testing.TB, opts vaultfake.Options) (*vaultfake.Server, string, ed25519.PublicKey) {
	tb.Helper()
	fake, err := vaultfake.Start(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fake.Close() })
	if err := fake.AddPolicy("cardsignd", map[string][]string{
		"transit/keys/agent-cards":        {"read", "create", "update"},
		"transit/keys/agent-cards/rotate": {"update"},
		"transit/sign/agent-cards":        {"update"},
		"transit/keys/log":                {"read"},
		"transit/sign/log":                {"update"},
	}); err != nil {
		tb.Fatal(err)
	}
	fake.AddAppRole("cardsignd-role", "cardsignd-secret", 20*time.Minute, "cardsignd")
	if err := fake.CreateKey("log", "ed25519"); err != nil {
		tb.Fatal(err)
	}
	pub, _ := fake.PublicKey("log", 1)
	secret := filepath.Join(tb.TempDir(), "secret-id")
	if err := os.WriteFile(secret, []byte("cardsignd-secret\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return fake, secret, pub.(ed25519.PublicKey)
}

// vaultConfig is a daemon config whose keys are versions of one Transit
// key in fake, logging in with AppRole; with logKey, the transparency log's
// key is the Ed25519 Transit key too.
func vaultConfig(fake *vaultfake.Server, secret string, logKey bool) string {
	c := fmt.Sprintf("keys:\n  backend: hashivault\nhashivault:\n  address: %s\n  key: agent-cards\n  rate_limit: 100000\n"+
		"  auth:\n    method: approle\n    role_id: cardsignd-role\n    secret_id_file: %s\n", fake.URL(), secret)
	if logKey {
		c += "log:\n  origin: cardsign.example.com/log\n  keys: [\"hashivault://log/1\"]\n"
	}
	return c
}

// TestDaemonHashiVault: keys made and rotated in Transit (AppRole login,
// a least-privilege policy), registered cards re-signed through a
// rotation and a revocation, and the transparency log signed with a
// Transit Ed25519 key. Transit cannot disable one version, so revocation
// is cardsign's alone.
func TestDaemonHashiVault(t *testing.T) {
	fake, secret, logPub := vaultFake(t, vaultfake.Options{})
	kmsLifecycle(t, os.Environ(), vaultConfig(fake, secret, true), nil, logPub)
}

// TestDaemonTPM: keys generated inside a TPM 2.0 (swtpm, through
// tpm2-abrmd and libtpm2-pkcs11), rotated, registered cards re-signed and
// a key revoked, through cardsignd's pkcs11 backend.
func TestDaemonTPM(t *testing.T) {
	tpm := swtpmtest.Start(t)
	pin := filepath.Join(t.TempDir(), "pin")
	if err := os.WriteFile(pin, []byte(tpm.PIN+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kmsLifecycle(t, tpm.Environ(), fmt.Sprintf("keys:\n  backend: pkcs11\n  default_alg: ES256\npkcs11:\n  module: %s\n  token: %s\n  pin_file: %s\n",
		tpm.Module, tpm.Token, pin), nil, nil)
}
