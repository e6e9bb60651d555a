package daemonconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestVaultsConfig: the azurekv and hashivault sections load, and each
// mistake is refused with the field and the file's line.
func TestVaultsConfig(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret-id")
	if err := os.WriteFile(secret, []byte("s3cret-id\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "loose-secret-id")
	if err := os.WriteFile(loose, []byte("s3cret-id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"azure", "keys:\n  backend: azurekv\n  default_alg: ES384\nazurekv:\n  key: azurekv://v.vault.azure.net/keys/cards\n  hsm: true\n  credential: workload\n", nil},
		{"vault approle", fmt.Sprintf("keys:\n  backend: hashivault\nhashivault:\n  address: https://vault.example:8200\n  namespace: team\n  key: cards\n  auth:\n    method: approle\n    role_id: r\n    secret_id_file: %q\n", secret), nil},
		{"vault kubernetes", "hashivault:\n  address: https://vault.example:8200\n  auth: {method: kubernetes, role: cardsign}\n", nil},
		{"azure without a key", "keys:\n  backend: azurekv\nazurekv:\n  hsm: true\n", []string{"keys.backend", "azurekv.key"}},
		{"azure with a version", "azurekv:\n  key: azurekv://v.vault.azure.net/keys/cards/0123456789abcdef0123456789abcdef\n", []string{"c.yaml:2", "azurekv.key", "no version"}},
		{"azure Ed25519", "keys:\n  backend: azurekv\n  default_alg: EdDSA\nazurekv:\n  key: azurekv://v.vault.azure.net/keys/cards\n", []string{"keys.default_alg", "no Ed25519"}},
		{"azure credential", "azurekv:\n  credential: cli\n", []string{"azurekv.credential", `"cli"`}},
		{"azure rsa bits", "azurekv:\n  rsa_bits: 1024\n", []string{"azurekv.rsa_bits"}},
		{"vault without a key", "keys:\n  backend: hashivault\nhashivault:\n  address: https://vault.example\n", []string{"keys.backend", "hashivault.key"}},
		{"vault over http", "hashivault:\n  address: http://vault.example:8200\n", []string{"hashivault.address", "https"}},
		{"vault approle without a secret", "hashivault:\n  auth: {method: approle, role_id: r}\n", []string{"hashivault.auth", "secret_id_file"}},
		{"vault unknown method", "hashivault:\n  auth: {method: ldap}\n", []string{"hashivault.auth.method", `"ldap"`}},
		{"vault token with a role", "hashivault:\n  auth: {role: x}\n", []string{"hashivault.auth", "token auth takes token_file only"}},
		{"vault relative file", "hashivault:\n  auth: {token_file: token}\n", []string{"hashivault.auth.token_file", "absolute"}},
		{"azure key host not allowed", "azurekv:\n  key: azurekv://v.example.com/keys/cards\n", []string{"azurekv.key", "not in azurekv.allowed_hosts"}},
		{"azure suffix too short", "azurekv:\n  allowed_hosts: [.net]\n", []string{"azurekv.allowed_hosts[0]", "two labels"}},
		{"vault mount", "hashivault:\n  mount: ../sys\n", []string{"hashivault.mount"}},
		{"vault key name", "hashivault:\n  key: a/b\n", []string{"hashivault.key"}},
		{"vault token file with approle", fmt.Sprintf("hashivault:\n  auth: {method: approle, role_id: r, secret_id_file: %q, token_file: /t}\n", secret), []string{"hashivault.auth.token_file", "token auth"}},
		{"vault log key without a version", "hashivault:\n  address: https://vault.example\nlog:\n  keys: [\"hashivault://log\"]\n", []string{"log.keys[0]", "hashivault://KEY/VERSION"}},
		{"vault secret readable by others", fmt.Sprintf("hashivault:\n  auth: {method: approle, role_id: r, secret_id_file: %q}\n", loose), []string{"hashivault.auth.secret_id_file", "chmod 600"}},
		{"vault secret missing", fmt.Sprintf("hashivault:\n  auth: {method: approle, role_id: r, secret_id_file: %q}\n", filepath.Join(dir, "absent")), []string{"hashivault.auth.secret_id_file", "no such file"}},
		{"vault unknown field", "hashivault:\n  adress: https://vault.example\n", []string{"c.yaml:2", `unknown field "adress"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := loadValidated(t, tc.yaml)
			wantMentions(t, cfg, err, tc.want)
		})
	}
	cfg, _, err := loadValidated(t, fmt.Sprintf("hashivault:\n  auth: {method: approle, role_id: r, secret_id_file: %q}\n", secret))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := cfg.HashiVault.Auth.SecretID(); err != nil || id != "s3cret-id" {
		t.Fatalf("SecretID: %q, %v", id, err)
	}
}
