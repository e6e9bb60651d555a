package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name, yaml string
		wantErr    []string // every substring must appear; none: valid
	}{
		{"empty file means defaults", "", nil},
		{"embedded default on other loopback ports", "grpc_addr: 127.0.0.1:9700\nhttp_addr: '[::1]:9701'\n", nil},
		{"unknown field", "signing:\n  bogus: 1\n", []string{"line 2", "bogus"}},
		{"wrong type", "keys:\n  prepublish: soon\n", []string{"line 2", "soon"}},
		{"non-loopback without TLS", "grpc_addr: 0.0.0.0:7700\n", []string{"grpc_addr", "not a loopback address", "TLS"}},
		{"same address twice", "grpc_addr: 127.0.0.1:7700\nhttp_addr: 127.0.0.1:7700\n", []string{"must differ"}},
		{"every problem at once", "log_level: loud\nkeys:\n  default_alg: HS256\n  on_revoke: maybe\nsigning:\n  jku: http://keys.example.com\n  max_card_bytes: 0\naudit:\n  batch_size: 0\n",
			[]string{"log_level", "keys.default_alg", "keys.on_revoke", "signing.jku", "signing.max_card_bytes", "audit.batch_size"}},
		{"pkcs11 backend needs module and token", "keys:\n  backend: pkcs11\n", []string{"pkcs11.module", "pkcs11.token"}},
		{"relative module path", "pkcs11:\n  module: libsofthsm2.so\n", []string{"absolute path"}},
		{"gcpkms backend needs a crypto key", "keys:\n  backend: gcpkms\n", []string{"gcpkms.crypto_key"}},
		{"plaintext gRPC to a remote KMS", "gcpkms:\n  endpoint: kms.example.com:443\n  insecure: true\n  crypto_key: projects/p/locations/l/keyRings/r/cryptoKeys/k\n", []string{"gcpkms.insecure", "loopback"}},
		{"awskms backend needs a key spec", "keys:\n  backend: awskms\n", []string{"awskms.key_spec"}},
		{"unknown backend", "keys:\n  backend: vault\n", []string{"keys.backend", "vault"}},
		{"key spec that cannot make the default alg", "keys:\n  backend: awskms\nawskms:\n  key_spec: RSA_3072\n", []string{"keys.default_alg", "RSA_3072"}},
		{"plain http to a remote AWS endpoint", "awskms:\n  endpoint: http://kms.example.com\n", []string{"awskms.endpoint", "https"}},
		{"insecure without an endpoint", "gcpkms:\n  insecure: true\n  crypto_key: projects/p/locations/l/keyRings/r/cryptoKeys/k\n", []string{"gcpkms.insecure"}},
		{"AWS fake on loopback", "awskms:\n  endpoint: http://127.0.0.1:9999\n  region: us-east-1\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := loadConfig(path)
			if err == nil {
				err = cfg.validate()
			}
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				if !filepath.IsAbs(cfg.DataDir) || !filepath.IsAbs(cfg.Keys.Dir) {
					t.Fatalf("data and key directories must be made absolute: %q %q", cfg.DataDir, cfg.Keys.Dir)
				}
				return
			}
			if err == nil {
				t.Fatalf("config accepted, want an error mentioning %v", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not mention %q:\n%v", want, err)
				}
			}
		})
	}
}
