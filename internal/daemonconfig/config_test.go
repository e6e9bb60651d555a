package daemonconfig

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testpki"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// loadValidated writes yml to c.yaml in a temporary directory, then loads
// and validates it as the daemon does at start.
func loadValidated(t *testing.T, yml string) (cfg Config, path string, err error) {
	t.Helper()
	path = testsupport.WriteFileMode(t, filepath.Join(t.TempDir(), "c.yaml"), yml, 0o600)
	cfg, err = Load(path)
	if err == nil {
		err = cfg.Validate()
	}
	return cfg, path, err
}

// wantMentions checks err mentions every one of want; with none, the config
// must be valid and its directories made absolute.
func wantMentions(t *testing.T, cfg Config, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("valid config refused: %v", err)
		}
		if !filepath.IsAbs(cfg.DataDir) || !filepath.IsAbs(cfg.Keys.Dir) {
			t.Fatalf("data and key directories must be made absolute: %q %q", cfg.DataDir, cfg.Keys.Dir)
		}
		return
	}
	if err == nil {
		t.Fatalf("config accepted, want an error mentioning %v", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not mention %q:\n%v", w, err)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name, yaml string
		wantErr    []string // every substring must appear; none: valid
	}{
		{"empty file means defaults", "", nil},
		{"embedded default on other loopback ports", "grpc_addr: 127.0.0.1:9700\nhttp_addr: '[::1]:9701'\n", nil},
		{"unknown field", "signing:\n  bogus: 1\n", []string{"c.yaml:2:", "unknown field \"bogus\""}},
		{"wrong type", "keys:\n  prepublish: soon\n", []string{"c.yaml:2:", "soon"}},
		{"type error and validation problems together", "keys:\n  prepublish: soon\nlog_level: loud\n", []string{"c.yaml:2:", "soon", "c.yaml:3:1: log_level"}},
		{"duplicate key", "log_level: info\nlog_level: debug\n", []string{"c.yaml:2", "already defined"}},
		{"non-loopback without TLS", "grpc_addr: 0.0.0.0:7700\n", []string{"c.yaml:1:1: grpc_addr", "not a loopback address", "tls.cert_file", "auth.tokens"}},
		{"non-loopback with TLS but no authentication", "grpc_addr: 0.0.0.0:7700\ntls:\n  cert_file: CERT\n  key_file: KEY\n", []string{"grpc_addr", "authentication"}},
		{"non-loopback with TLS and a token", "grpc_addr: 0.0.0.0:7700\nhttp_addr: 0.0.0.0:7701\ntls:\n  cert_file: CERT\n  key_file: KEY\nauth:\n  tokens:\n    - {name: ci, sha256: " + strings.Repeat("ab", 32) + ", roles: [signer]}\n", nil},
		{"located problems deep in lists", "auth:\n  tokens:\n    - name: ci\n      sha256: nothex\n      roles: [signer, root]\n", []string{"c.yaml:4:7: auth.tokens[0].sha256", "c.yaml:5:", "auth.tokens[0].roles[1]", "unknown role"}},
		{"duplicate token names and hashes", "auth:\n  tokens:\n    - {name: ci, sha256: " + strings.Repeat("ab", 32) + ", roles: [signer]}\n    - {name: ci, sha256: " + strings.Repeat("AB", 32) + ", roles: [admin]}\n", []string{"auth.tokens[1].name", "auth.tokens[1].sha256", "same token"}},
		{"clients need a client CA", "auth:\n  clients:\n    - {identity: \"spiffe://example.org/*\", roles: [signer]}\n", []string{"auth.clients", "client_ca_file"}},
		{"client CA needs TLS", "tls:\n  client_ca_file: CERT\n", []string{"tls.client_ca_file", "cert_file"}},
		{"missing TLS files", "tls:\n  cert_file: /nonexistent/cert.pem\n  key_file: /nonexistent/key.pem\n", []string{"tls.cert_file", "tls.key_file", "no such file"}},
		{"key that does not match the certificate", "tls:\n  cert_file: CERT\n  key_file: OTHERKEY\n", []string{"c.yaml:1:1: tls:", "does not match"}},
		{"bad client_auth", "tls:\n  cert_file: CERT\n  key_file: KEY\n  client_ca_file: CERT\n  client_auth: sometimes\n", []string{"c.yaml:5:3: tls.client_auth"}},
		{"policy problems are located", "policy:\n  rules:\n    - name: a\n      roles: [signer]\n      card_names: []\n      hosts: [\"https://x.example.com\"]\n", []string{"policy.rules[0].card_names", "policy.rules[0].hosts[0]", "c.yaml:6:"}},
		{"limits", "limits:\n  rate: -1\n  backend_concurrency: {vault: 3, file: 0}\n  request_timeout: 0s\n  max_message_bytes: 10\n", []string{"limits.rate", "limits.backend_concurrency.vault", "limits.backend_concurrency.file", "limits.request_timeout", "limits.max_message_bytes"}},
		{"policy identities that name no caller", "auth:\n  tokens:\n    - {name: ci, sha256: " + strings.Repeat("ab", 32) + ", roles: [signer]}\npolicy:\n  rules:\n    - name: a\n      identities: [\"release-pipeline\", \"token:nope\", \"token:ci\", \"cert:spiffe://x/*\"]\n      card_names: [\"*\"]\n      hosts: [\"*\"]\n    - name: b\n      roles: [admin]\n      card_names: [\"*\"]\n      hosts: [\"*\"]\n",
			[]string{"policy.rules[0].identities[0]", "cert:release-pipeline", "policy.rules[0].identities[1]", "no token named \"nope\"", "policy.rules[1].roles"}},
		{"limits valid", "limits:\n  rate: 0\n  backend_concurrency: {default: 8, pkcs11: 2}\n", nil},
		{"same address twice", "grpc_addr: 127.0.0.1:7700\nhttp_addr: 127.0.0.1:7700\n", []string{"must differ"}},
		{"every problem at once", "log_level: loud\nkeys:\n  default_alg: HS256\n  on_revoke: maybe\nsigning:\n  jku: http://keys.example.com\n  max_card_bytes: 0\n  max_card_values: -1\naudit:\n  batch_size: 0\n",
			[]string{"log_level", "keys.default_alg", "keys.on_revoke", "signing.jku", "signing.max_card_bytes", "c.yaml:8:3: signing.max_card_values", "audit.batch_size"}},
		{"pkcs11 backend needs module and token", "keys:\n  backend: pkcs11\n", []string{"pkcs11.module", "pkcs11.token"}},
		{"relative module path", "pkcs11:\n  module: libsofthsm2.so\n", []string{"absolute path"}},
		{"key import and pin-source directories", "keys:\n  import_dirs: [/srv/keys, /run/secrets]\npkcs11:\n  pin_source_dirs: [/run/secrets]\n", nil},
		{"relative key import and pin-source directories", "keys:\n  import_dirs: [/srv/keys, keys]\npkcs11:\n  pin_source_dirs: [pins]\n",
			[]string{"c.yaml:2:", "keys.import_dirs[1]", "\"keys\" must be an absolute path", "pkcs11.pin_source_dirs[0]"}},
		{"importing from anywhere", "keys:\n  import_dirs: [/]\n", []string{"keys.import_dirs[0]", "any file"}},
		{"gcpkms backend needs a crypto key", "keys:\n  backend: gcpkms\n", []string{"gcpkms.crypto_key"}},
		{"plaintext gRPC to a remote KMS", "gcpkms:\n  endpoint: kms.example.com:443\n  insecure: true\n  crypto_key: projects/p/locations/l/keyRings/r/cryptoKeys/k\n", []string{"gcpkms.insecure", "loopback"}},
		{"awskms backend needs a key spec", "keys:\n  backend: awskms\n", []string{"awskms.key_spec"}},
		{"unknown backend", "keys:\n  backend: vault\n", []string{"keys.backend", "vault"}},
		{"key spec that cannot make the default alg", "keys:\n  backend: awskms\nawskms:\n  key_spec: RSA_3072\n", []string{"keys.default_alg", "RSA_3072"}},
		{"plain http to a remote AWS endpoint", "awskms:\n  endpoint: http://kms.example.com\n", []string{"awskms.endpoint", "https"}},
		{"insecure without an endpoint", "gcpkms:\n  insecure: true\n  crypto_key: projects/p/locations/l/keyRings/r/cryptoKeys/k\n", []string{"gcpkms.insecure"}},
		{"AWS fake on loopback", "awskms:\n  endpoint: http://127.0.0.1:9999\n  region: us-east-1\n", nil},
		{"log.private", "log:\n  private: open\n", nil},
		{"log.private unknown", "log:\n  private: hidden\n", []string{"c.yaml:2:3: log.private", "\"hidden\" is not sealed"}},
		{"registry quotas", "registry:\n  max_agents: 500\n  max_agents_per_caller: 50\n", nil},
		{"registry quotas out of range", "registry:\n  max_agents: -1\n  max_agents_per_caller: 2000000\n",
			[]string{"c.yaml:2:3: registry.max_agents", "-1 must be between 1 and 1000000", "c.yaml:3:3: registry.max_agents_per_caller", "(0 or unset: 1000)"}},
		{"registry re-signing pace", "registry:\n  resign_rate: 280\n  resign_concurrency: 16\n", nil},
		{"registry re-signing pace out of range", "registry:\n  resign_rate: -1\n  resign_concurrency: 2000\n",
			[]string{"c.yaml:2:3: registry.resign_rate", "c.yaml:3:3: registry.resign_concurrency", "(0 or unset: 48)"}},
	}
	ca := testpki.NewCA(t, "config test CA")
	c, k := ca.Issue(t, testpki.ServerLeaf())
	certFile, keyFile := testpki.WriteFiles(t, t.TempDir(), "server", c, k)
	c2, k2 := ca.Issue(t, testpki.ServerLeaf())
	_, otherKey := testpki.WriteFiles(t, t.TempDir(), "other", c2, k2)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			yml := strings.NewReplacer("CERT", certFile, "OTHERKEY", otherKey, "KEY", keyFile).Replace(tc.yaml)
			cfg, _, err := loadValidated(t, yml)
			wantMentions(t, cfg, err, tc.wantErr)
		})
	}
}

func TestConfigConnectionLimits(t *testing.T) {
	tests := []struct {
		name, yaml string
		wantErr    []string
	}{
		{"defaults", "", nil},
		{"all set", "limits:\n  max_connections: 100\n  max_connections_per_ip: 10\n  max_streams_per_connection: 8\n  max_header_bytes: 8192\n  handshake_timeout: 5s\n  idle_timeout: 1m\n  refusal_log_burst: 3\n  refusal_log_interval: 30s\n", nil},
		{"out of range", "limits:\n  max_connections: -1\n  max_connections_per_ip: -2\n  max_streams_per_connection: 0\n  max_header_bytes: 100\n  handshake_timeout: 1ms\n  idle_timeout: 0s\n  refusal_log_burst: 0\n  refusal_log_interval: 10ms\n",
			[]string{"c.yaml:2:3: limits.max_connections", "c.yaml:3:3: limits.max_connections_per_ip", "c.yaml:4:3: limits.max_streams_per_connection",
				"c.yaml:5:3: limits.max_header_bytes", "c.yaml:6:3: limits.handshake_timeout", "c.yaml:7:3: limits.idle_timeout",
				"c.yaml:8:3: limits.refusal_log_burst", "c.yaml:9:3: limits.refusal_log_interval"}},
		{"per-IP above the total", "limits:\n  max_connections: 10\n  max_connections_per_ip: 20\n", []string{"c.yaml:3:3: limits.max_connections_per_ip", "more than limits.max_connections"}},
		{"unauthenticated streams set", "limits:\n  max_unauthenticated_streams: 10\n  max_unauthenticated_streams_per_ip: 10\n", nil},
		{"unauthenticated streams out of range", "limits:\n  max_unauthenticated_streams: 0\n  max_unauthenticated_streams_per_ip: -1\n",
			[]string{"c.yaml:2:3: limits.max_unauthenticated_streams: 0 must be between 1", "c.yaml:3:3: limits.max_unauthenticated_streams_per_ip: -1 must be at least 1"}},
		{"unauthenticated streams per-IP above the total", "limits:\n  max_unauthenticated_streams: 10\n  max_unauthenticated_streams_per_ip: 20\n",
			[]string{"c.yaml:3:3: limits.max_unauthenticated_streams_per_ip", "more than limits.max_unauthenticated_streams (10)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := loadValidated(t, tc.yaml)
			wantMentions(t, cfg, err, tc.wantErr)
		})
	}
}

func TestConnLimitsDerivedFromFileLimit(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		nofile          uint64
		configured      LimitsConfig
		wantMax, wantIP int
	}{
		{nofile: 1024, wantMax: 384, wantIP: 64},
		{nofile: 20000, wantMax: 4096, wantIP: 64},
		{nofile: 256, wantMax: 16, wantIP: 16},
		{nofile: 0, wantMax: 4096, wantIP: 64},
		{nofile: 1024, configured: LimitsConfig{MaxConnections: 10, MaxConnectionsPerIP: 3}, wantMax: 10, wantIP: 3},
		{nofile: 1024, configured: LimitsConfig{MaxConnections: 10}, wantMax: 10, wantIP: 10},
	} {
		got := ConnLimits(tc.configured, tc.nofile, quiet)
		if got.MaxConnections != tc.wantMax || got.MaxConnectionsPerIP != tc.wantIP {
			t.Errorf("nofile %d, configured %+v: max %d per IP %d, want %d and %d", tc.nofile, tc.configured, got.MaxConnections, got.MaxConnectionsPerIP, tc.wantMax, tc.wantIP)
		}
	}
}
