// Package daemonconfig is cardsignd's configuration: the YAML schema and its
// defaults, decoding with every problem located at FILE:LINE:COL, validation
// (the exposure rule, TLS material, callers, policy, limits), connection
// limits derived from the open file limit, and the state-directory mode
// checks. The daemon's main only parses flags and wires what this describes.
package daemonconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/limits"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/secretfile"
	"github.com/cardsign/cardsign/strictjson"
)

// Config is cardsignd's configuration: one YAML file, every field optional,
// flags override. README.md documents each field with its default.
type Config struct {
	DataDir         string            `yaml:"data_dir"`
	GRPCAddr        string            `yaml:"grpc_addr"`
	HTTPAddr        string            `yaml:"http_addr"`
	LogLevel        string            `yaml:"log_level"`
	LogFormat       string            `yaml:"log_format"`
	ShutdownTimeout time.Duration     `yaml:"shutdown_timeout"`
	Keys            KeysConfig        `yaml:"keys"`
	Signing         SigningConfig     `yaml:"signing"`
	JWKS            JWKSConfig        `yaml:"jwks"`
	Revocations     RevocationsConfig `yaml:"revocations"`
	Audit           AuditConfig       `yaml:"audit"`
	Registry        RegistryConfig    `yaml:"registry"`
	PKCS11          PKCS11Config      `yaml:"pkcs11"`
	GCPKMS          GCPKMSConfig      `yaml:"gcpkms"`
	AWSKMS          AWSKMSConfig      `yaml:"awskms"`
	TLS             TLSConfig         `yaml:"tls"`
	Auth            AuthConfig        `yaml:"auth"`
	Policy          policy.Config     `yaml:"policy"`
	Limits          LimitsConfig      `yaml:"limits"`
	Readiness       ReadinessConfig   `yaml:"readiness"`
	Store           StoreConfig       `yaml:"store"`
	Log             LogConfig         `yaml:"log"`
	Catalog         CatalogConfig     `yaml:"catalog"`
	// Replica names this process among the replicas sharing a store, in
	// the logs and the duties lease; empty: host/pid/random.
	Replica string `yaml:"replica"`

	// ClockSkew is not in the file: ApplyEnv reads it from ClockSkewEnv
	// (a test knob).
	ClockSkew time.Duration `yaml:"-"`

	// file and positions locate problems in the file the config came from.
	file      string
	positions map[string]position
}

// TLSConfig turns TLS on for both listeners; with ClientCAFile, the gRPC
// listener verifies client certificates (mTLS).
type TLSConfig struct {
	CertFile       string        `yaml:"cert_file"`
	KeyFile        string        `yaml:"key_file"`
	ClientCAFile   string        `yaml:"client_ca_file"`
	ClientAuth     string        `yaml:"client_auth"`
	ReloadInterval time.Duration `yaml:"reload_interval"`
}

func (c TLSConfig) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" }

// AuthConfig lists who may call: bearer tokens (by SHA-256) and client
// certificate identities, each with roles.
type AuthConfig struct {
	Tokens  []TokenConfig  `yaml:"tokens"`
	Clients []ClientConfig `yaml:"clients"`
	OIDC    OIDCConfig     `yaml:"oidc"`
}

func (c AuthConfig) Enabled() bool {
	return len(c.Tokens) > 0 || len(c.Clients) > 0 || len(c.OIDC.Issuers) > 0
}

// OIDCConfig is auth.oidc: the issuers whose identity tokens release
// pipelines present, and the rules that grant roles by their claims (see
// package access/oidc).
type OIDCConfig struct {
	Issuers       []OIDCIssuerConfig `yaml:"issuers"`
	Rules         []OIDCRuleConfig   `yaml:"rules"`
	ClockSkew     time.Duration      `yaml:"clock_skew"`
	MaxTokenBytes int                `yaml:"max_token_bytes"`
}

// OIDCIssuerConfig is one trusted issuer.
type OIDCIssuerConfig struct {
	Issuer       string            `yaml:"issuer"`
	Audience     string            `yaml:"audience"`
	Algorithms   []string          `yaml:"algorithms"`
	SubjectClaim string            `yaml:"subject_claim"`
	Claims       map[string]string `yaml:"claims"`
	CAFile       string            `yaml:"ca_file"`
}

// OIDCRuleConfig grants roles to the tokens of one issuer whose claims match.
type OIDCRuleConfig struct {
	Issuer string            `yaml:"issuer"`
	Claims map[string]string `yaml:"claims"`
	Roles  []string          `yaml:"roles"`
}

// TokenConfig is one bearer token: never the token, only its SHA-256.
type TokenConfig struct {
	Name   string   `yaml:"name"`
	SHA256 string   `yaml:"sha256"`
	Roles  []string `yaml:"roles"`
}

// ClientConfig grants roles to client certificate identities matching a
// glob pattern.
type ClientConfig struct {
	Identity string   `yaml:"identity"`
	Roles    []string `yaml:"roles"`
}

// LimitsConfig bounds what one caller, and all callers together, can ask.
type LimitsConfig struct {
	Rate               float64        `yaml:"rate"`
	Burst              int            `yaml:"burst"`
	BackendConcurrency map[string]int `yaml:"backend_concurrency"`
	RequestTimeout     time.Duration  `yaml:"request_timeout"`
	MaxMessageBytes    int            `yaml:"max_message_bytes"`

	// Connection limits, per listener (gRPC and HTTP each). 0 derives
	// MaxConnections and MaxConnectionsPerIP from the open file limit.
	MaxConnections          int           `yaml:"max_connections"`
	MaxConnectionsPerIP     int           `yaml:"max_connections_per_ip"`
	MaxStreamsPerConnection int           `yaml:"max_streams_per_connection"`
	MaxHeaderBytes          int           `yaml:"max_header_bytes"`
	HandshakeTimeout        time.Duration `yaml:"handshake_timeout"`
	IdleTimeout             time.Duration `yaml:"idle_timeout"`
	// Streams open at once that no credential authenticated (health
	// Watch), in all and per source address, on the gRPC listener.
	MaxUnauthenticatedStreams      int `yaml:"max_unauthenticated_streams"`
	MaxUnauthenticatedStreamsPerIP int `yaml:"max_unauthenticated_streams_per_ip"`
	// Refused calls and connections are logged RefusalLogBurst at a time
	// per reason per RefusalLogInterval, then summarized.
	RefusalLogBurst    int           `yaml:"refusal_log_burst"`
	RefusalLogInterval time.Duration `yaml:"refusal_log_interval"`
}

// ReadinessConfig: the periodic canary behind /readyz.
type ReadinessConfig struct {
	Interval time.Duration `yaml:"interval"`
	Timeout  time.Duration `yaml:"timeout"`
}

// GCPKMSConfig enables gcpkms: keys. Credentials come from the standard
// Google chain (GOOGLE_APPLICATION_CREDENTIALS, metadata server, …).
type GCPKMSConfig struct {
	Endpoint  string  `yaml:"endpoint"`
	Insecure  bool    `yaml:"insecure"`
	CryptoKey string  `yaml:"crypto_key"`
	RateLimit float64 `yaml:"rate_limit"`
}

// AWSKMSConfig enables awskms: keys. Credentials come from the standard AWS
// chain (environment, shared config, instance role, …).
type AWSKMSConfig struct {
	Endpoint  string  `yaml:"endpoint"`
	Region    string  `yaml:"region"`
	KeySpec   string  `yaml:"key_spec"`
	Alias     string  `yaml:"alias"`
	RateLimit float64 `yaml:"rate_limit"`
}

// A backend section with any field set enables that backend.
func (c GCPKMSConfig) Enabled() bool { return c != GCPKMSConfig{} }
func (c AWSKMSConfig) Enabled() bool { return c != AWSKMSConfig{} }
func (c PKCS11Config) Enabled() bool { return c.Module != "" || len(c.AllowedModules) > 0 }

// keySpecAlgs maps an AWS KMS KeySpec to the JOSE algs its keys can sign.
var keySpecAlgs = map[string][]jose.Alg{
	"ECC_NIST_P256": {jose.ES256}, "ECC_NIST_P384": {jose.ES384}, "ECC_NIST_P521": {jose.ES512},
	"RSA_2048": {jose.RS256, jose.PS256}, "RSA_3072": {jose.RS256, jose.PS256}, "RSA_4096": {jose.RS256, jose.PS256},
	"ECC_NIST_EDWARDS25519": {jose.EdDSA},
}

// PKCS11Config enables the pkcs11: backend (HSMs, SoftHSM). The PIN is read
// from PINFile or the CARDSIGN_PKCS11_PIN environment variable, never from
// this file, so the config can be shared and versioned.
type PKCS11Config struct {
	Module         string   `yaml:"module"`
	AllowedModules []string `yaml:"allowed_modules"`
	Token          string   `yaml:"token"`
	PINFile        string   `yaml:"pin_file"`
	PoolSize       int      `yaml:"pool_size"`
	// PINSourceDirs are the directories a key URI's pin-source file may be
	// in; empty (the default) refuses pin-source.
	PINSourceDirs []string `yaml:"pin_source_dirs"`
}

// KeysConfig: where new keys are made and how they age.
type KeysConfig struct {
	Backend     string        `yaml:"backend"`
	Dir         string        `yaml:"dir"`
	DefaultAlg  string        `yaml:"default_alg"`
	Prepublish  time.Duration `yaml:"prepublish"`
	RetireGrace time.Duration `yaml:"retire_grace"`
	OnRevoke    string        `yaml:"on_revoke"`
	// ImportDirs are the directories `keys import file:…` may read key
	// files from, besides Dir (always allowed); symlinks are resolved
	// before the check.
	ImportDirs []string `yaml:"import_dirs"`
}

// SigningConfig: what goes into signatures and what cards are accepted.
type SigningConfig struct {
	JKU          string `yaml:"jku"`
	MaxCardBytes int    `yaml:"max_card_bytes"`
	MaxCardDepth int    `yaml:"max_card_depth"`
	// MaxCardValues caps the JSON values of a card: each costs memory and
	// work whatever its size in bytes (card.DefaultMaxValues).
	MaxCardValues int `yaml:"max_card_values"`
	// Lifetime, when set, puts iat and exp in every signature's protected
	// header; RefreshAt is the fraction of it after which the registry signs
	// a registered card again (default 0.5).
	Lifetime  time.Duration `yaml:"lifetime"`
	RefreshAt float64       `yaml:"refresh_at"`
}

// JWKSConfig: how the published key set is cached by clients.
type JWKSConfig struct {
	MaxAge time.Duration `yaml:"max_age"`
}

// RevocationsConfig: the signed revocation document.
type RevocationsConfig struct {
	TTL time.Duration `yaml:"ttl"`
	// AuditHead puts the audit log's head in each document (default true);
	// false only while verifiers built before it are still in use.
	AuditHead *bool `yaml:"audit_head"`
}

// AuditConfig: group commit of audit records.
type AuditConfig struct {
	BatchSize int `yaml:"batch_size"`
}

// RegistryConfig is the card registry's: how many versions of each agent's
// card are kept (0: limits.DefaultRegistryKeep), and how many agents it holds
// in all and per caller (0: limits.DefaultRegistryMaxAgents,
// limits.DefaultRegistryMaxAgentsPerCaller).
type RegistryConfig struct {
	Keep               int `yaml:"keep"`
	MaxAgents          int `yaml:"max_agents"`
	MaxAgentsPerCaller int `yaml:"max_agents_per_caller"`
}

// maxRegistryAgents caps the registry quotas: each agent keeps up to
// registry.keep versions of a card, and the re-signing duty reads them all.
const maxRegistryAgents = 1_000_000

// Defaults is the embedded default: everything in ./cardsignd-data, loopback
// listeners, an ES256 file key.
func Defaults() Config {
	return Config{
		DataDir:         "./cardsignd-data",
		GRPCAddr:        "127.0.0.1:7700",
		HTTPAddr:        "127.0.0.1:7701",
		LogLevel:        "info",
		LogFormat:       "text",
		ShutdownTimeout: 30 * time.Second,
		Keys: KeysConfig{
			Backend:     "file",
			DefaultAlg:  string(jose.ES256),
			Prepublish:  time.Hour,
			RetireGrace: 30 * 24 * time.Hour,
		},
		Signing: SigningConfig{
			MaxCardBytes:  strictjson.DefaultMaxBytes,
			MaxCardDepth:  strictjson.DefaultMaxDepth,
			MaxCardValues: card.DefaultMaxValues,
		},
		JWKS:        JWKSConfig{MaxAge: time.Hour},
		Revocations: RevocationsConfig{TTL: 24 * time.Hour},
		Audit:       AuditConfig{BatchSize: 512},
		TLS:         TLSConfig{ReloadInterval: 10 * time.Second},
		Limits: LimitsConfig{
			Rate:           100,
			Burst:          200,
			RequestTimeout: 30 * time.Second,

			MaxStreamsPerConnection: limits.DefaultMaxStreamsPerConnection,
			MaxHeaderBytes:          limits.DefaultMaxHeaderBytes,
			HandshakeTimeout:        limits.DefaultHandshakeTimeout,
			IdleTimeout:             limits.DefaultIdleTimeout,
			RefusalLogBurst:         limits.DefaultRefusalLogBurst,
			RefusalLogInterval:      limits.DefaultRefusalLogInterval,

			MaxUnauthenticatedStreams:      limits.DefaultMaxUnauthenticatedStreams,
			MaxUnauthenticatedStreamsPerIP: limits.DefaultMaxUnauthenticatedStreamsPerIP,
		},
		Readiness: ReadinessConfig{Interval: 10 * time.Second, Timeout: 5 * time.Second},
		Store:     StoreConfig{MaxConns: DefaultStoreMaxConns},
		Log:       LogConfig{Origin: DefaultLogOrigin},
	}
}

// MaxConfigBytes caps the config file. Real configs are a few KiB; the cap
// keeps a wrong path (/dev/zero, a log, a disk image) from being read into
// memory and decoded, which costs many times its size.
const MaxConfigBytes = 1 << 20

// Load reads a YAML file over the defaults. Unknown fields are errors:
// a misspelt setting must not silently keep its default. Problems found
// while decoding are returned as a *Error with their lines.
func Load(path string) (Config, error) {
	cfg := Defaults()
	if path == "" {
		return cfg, nil
	}
	data, err := secretfile.ReadFile(path, MaxConfigBytes)
	if err != nil {
		return cfg, fmt.Errorf("config: %w; give the path of a YAML file of at most %d bytes", err, MaxConfigBytes)
	}
	cfg.file = path
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return cfg, &Error{File: path, Problems: []Problem{yamlProblem(err.Error())}}
	}
	cfg.positions = positions(&root)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	// An empty file (io.EOF) means all defaults.
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return cfg, &Error{File: path, Problems: []Problem{yamlProblem(err.Error())}}
		}
		// A type error leaves the other fields decoded: report these
		// problems together with what validation finds.
		ce := &Error{File: path, positions: cfg.positions}
		for _, e := range te.Errors {
			ce.Problems = append(ce.Problems, yamlProblem(e))
		}
		if verr := cfg.Validate(); verr != nil {
			var more *Error
			if errors.As(verr, &more) {
				ce.Problems = append(ce.Problems, more.Problems...)
			}
		}
		return cfg, ce
	}
	return cfg, nil
}

// Validate reports every problem, not just the first, each with its place
// in the config file when it came from there.
func (c *Config) Validate() error {
	var probs []Problem
	var bad reporter = func(path, format string, args ...any) {
		probs = append(probs, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if c.DataDir == "" {
		bad("data_dir", "must not be empty")
	}
	for _, a := range []struct{ name, addr string }{{"grpc_addr", c.GRPCAddr}, {"http_addr", c.HTTPAddr}} {
		name, addr := a.name, a.addr
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			bad(name, "%q is not host:port: %v", addr, err)
			continue
		}
		if card.IsLoopbackHost(host) {
			continue
		}
		// Exposure rule: beyond this machine, only with TLS and callers
		// who prove who they are.
		var missing []string
		if !c.TLS.Enabled() {
			missing = append(missing, "TLS (tls.cert_file and tls.key_file)")
		}
		if !c.Auth.Enabled() {
			missing = append(missing, "authentication (auth.tokens, or tls.client_ca_file with auth.clients)")
		}
		if len(missing) > 0 {
			bad(name, "%s is not a loopback address: listening beyond this machine requires %s; configure them, or listen on 127.0.0.1 or ::1",
				addr, strings.Join(missing, " and "))
		}
	}
	if c.GRPCAddr == c.HTTPAddr && !strings.HasSuffix(c.GRPCAddr, ":0") {
		bad("http_addr", "must differ from grpc_addr")
	}
	validateTLS(c, bad)
	validateAuth(c, bad)
	if _, probs := policy.Compile(c.Policy); len(probs) > 0 {
		for _, p := range probs {
			bad("policy."+p.Path, "%s", p.Message)
		}
	}
	validatePolicyCallers(c, bad)
	validateLimits(c, bad)
	if c.Registry.Keep < 0 || c.Registry.Keep > 10000 {
		bad("registry.keep", "%d must be between 1 and 10000 (0 or unset: %d)", c.Registry.Keep, limits.DefaultRegistryKeep)
	}
	if c.Registry.MaxAgents < 0 || c.Registry.MaxAgents > maxRegistryAgents {
		bad("registry.max_agents", "%d must be between 1 and %d (0 or unset: %d)", c.Registry.MaxAgents, maxRegistryAgents, limits.DefaultRegistryMaxAgents)
	}
	if c.Registry.MaxAgentsPerCaller < 0 || c.Registry.MaxAgentsPerCaller > maxRegistryAgents {
		bad("registry.max_agents_per_caller", "%d must be between 1 and %d (0 or unset: %d)", c.Registry.MaxAgentsPerCaller, maxRegistryAgents, limits.DefaultRegistryMaxAgentsPerCaller)
	}
	validateStore(c, bad)
	validateLog(c, bad)
	validateCatalog(c, bad)
	if c.Readiness.Interval < 100*time.Millisecond {
		bad("readiness.interval", "%s is shorter than 100ms", c.Readiness.Interval)
	}
	if c.Readiness.Timeout <= 0 {
		bad("readiness.timeout", "must be positive")
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level", "%q is not debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		bad("log_format", "%q is not text or json", c.LogFormat)
	}
	switch c.Keys.Backend {
	case "file":
	case "pkcs11":
		if c.PKCS11.Module == "" {
			bad("keys.backend", "pkcs11 needs pkcs11.module")
		}
		if c.PKCS11.Token == "" {
			bad("keys.backend", "pkcs11 needs pkcs11.token, the label of the token new keys are made in")
		}
	case "gcpkms":
		if c.GCPKMS.CryptoKey == "" {
			bad("keys.backend", "gcpkms needs gcpkms.crypto_key, the CryptoKey new versions are created in")
		}
	case "awskms":
		algs, known := keySpecAlgs[c.AWSKMS.KeySpec]
		switch {
		case c.AWSKMS.KeySpec == "":
			bad("keys.backend", "awskms needs awskms.key_spec")
		case !known:
			bad("awskms.key_spec", "%q is not one cardsign signs with", c.AWSKMS.KeySpec)
		case !slices.Contains(algs, jose.Alg(c.Keys.DefaultAlg)):
			bad("keys.default_alg", "%s cannot be made with awskms.key_spec %s (it signs %v)", c.Keys.DefaultAlg, c.AWSKMS.KeySpec, algs)
		}
	default:
		bad("keys.backend", "%q cannot create keys (file, pkcs11, gcpkms or awskms)", c.Keys.Backend)
	}
	switch c.Keys.OnRevoke {
	case "", "none", "disable":
	default:
		bad("keys.on_revoke", "%q is not none or disable", c.Keys.OnRevoke)
	}
	if c.GCPKMS.Insecure {
		if host, _, err := net.SplitHostPort(c.GCPKMS.Endpoint); err != nil || !card.IsLoopbackHost(host) {
			bad("gcpkms.insecure", "plaintext gRPC is only allowed to a loopback endpoint host:port (a local fake), not %q", c.GCPKMS.Endpoint)
		}
	}
	// A KMS answers with public keys and signatures: in clear text, anyone on
	// the path could substitute them. Plain http only to this machine.
	if e := c.AWSKMS.Endpoint; e != "" {
		u, err := url.Parse(e)
		if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && card.IsLoopbackHost(u.Hostname()))) {
			bad("awskms.endpoint", "%q must be an https URL (plain http only for a loopback fake)", e)
		}
	}
	if c.GCPKMS.RateLimit < 0 || c.AWSKMS.RateLimit < 0 {
		bad("gcpkms.rate_limit", "gcpkms.rate_limit and awskms.rate_limit must not be negative")
	}
	if c.PKCS11.Module != "" && !filepath.IsAbs(c.PKCS11.Module) {
		bad("pkcs11.module", "%q must be an absolute path", c.PKCS11.Module)
	}
	for _, m := range c.PKCS11.AllowedModules {
		if !filepath.IsAbs(m) {
			bad("pkcs11.allowed_modules", "%q must be an absolute path", m)
		}
	}
	for i, d := range c.PKCS11.PINSourceDirs {
		if !filepath.IsAbs(d) {
			bad(fmt.Sprintf("pkcs11.pin_source_dirs[%d]", i), "%q must be an absolute path", d)
		}
	}
	for i, d := range c.Keys.ImportDirs {
		if !filepath.IsAbs(d) {
			bad(fmt.Sprintf("keys.import_dirs[%d]", i), "%q must be an absolute path", d)
		} else if filepath.Clean(d) == "/" {
			bad(fmt.Sprintf("keys.import_dirs[%d]", i), "/ would allow importing any file the daemon can read; name the directory that holds the key files")
		}
	}
	if c.PKCS11.PINFile != "" {
		// The daemon reads it at start: a missing, special or oversized
		// file is refused here, not there.
		if _, err := c.PKCS11.PIN(); err != nil {
			bad("pkcs11.pin_file", "%v", errors.Unwrap(err))
		}
	}
	if c.PKCS11.PoolSize < 0 || c.PKCS11.PoolSize > 1024 {
		bad("pkcs11.pool_size", "%d must be between 0 (default) and 1024", c.PKCS11.PoolSize)
	}
	if _, err := jose.ParseAlg(c.Keys.DefaultAlg); err != nil {
		bad("keys.default_alg", "%v", err)
	}
	if c.Keys.Prepublish < 0 {
		bad("keys.prepublish", "must not be negative")
	}
	if c.Keys.RetireGrace < 0 {
		bad("keys.retire_grace", "must not be negative")
	}
	if c.Signing.Lifetime < 0 || (c.Signing.Lifetime > 0 && c.Signing.Lifetime < 10*time.Minute) {
		bad("signing.lifetime", "%s must be at least 10m (0 or unset: signatures without exp)", c.Signing.Lifetime)
	}
	if c.Signing.RefreshAt < 0 || c.Signing.RefreshAt >= 1 {
		bad("signing.refresh_at", "%g must be a fraction of signing.lifetime in (0, 1) (0 or unset: 0.5)", c.Signing.RefreshAt)
	}
	if c.Signing.JKU != "" && !strings.HasPrefix(c.Signing.JKU, "https://") {
		bad("signing.jku", "%q must be an https URL", c.Signing.JKU)
	}
	if c.Signing.MaxCardBytes <= 0 || c.Signing.MaxCardBytes > 16<<20 {
		bad("signing.max_card_bytes", "%d must be between 1 and 16 MiB", c.Signing.MaxCardBytes)
	}
	if c.Signing.MaxCardDepth <= 0 || c.Signing.MaxCardDepth > 1024 {
		bad("signing.max_card_depth", "%d must be between 1 and 1024", c.Signing.MaxCardDepth)
	}
	if c.Signing.MaxCardValues <= 0 || c.Signing.MaxCardValues > 1<<20 {
		bad("signing.max_card_values", "%d must be between 1 and 1048576 (default %d; each value of a card costs about 300 bytes of memory per call)", c.Signing.MaxCardValues, card.DefaultMaxValues)
	}
	if c.JWKS.MaxAge < 0 {
		bad("jwks.max_age", "must not be negative")
	}
	if c.Revocations.TTL < time.Minute {
		bad("revocations.ttl", "%s is shorter than a minute", c.Revocations.TTL)
	}
	if c.Audit.BatchSize <= 0 || c.Audit.BatchSize > 10000 {
		bad("audit.batch_size", "%d must be between 1 and 10000", c.Audit.BatchSize)
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown_timeout", "must be positive")
	}
	if len(probs) > 0 {
		return &Error{File: c.file, Problems: probs, positions: c.positions}
	}
	if c.Keys.Dir == "" {
		c.Keys.Dir = filepath.Join(c.DataDir, "keys")
	}
	c.Catalog = c.Catalog.withDefaults()
	// Key URIs are stored; a relative path would break when the daemon is
	// started from another directory.
	var err error
	if c.DataDir, err = filepath.Abs(c.DataDir); err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	if c.Keys.Dir, err = filepath.Abs(c.Keys.Dir); err != nil {
		return fmt.Errorf("keys.dir: %w", err)
	}
	return nil
}
