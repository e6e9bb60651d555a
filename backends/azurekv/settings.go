package azurekv

// This file is built whatever the build tags: what a binary needs to
// register the backend (Scheme, Config) is here, and the rest of the
// package, or its stub in no_azurekv.go, supplies Constructor and
// NotBuilt.

import (
	"log/slog"
	"net/http"
	"time"
)

// Scheme is the URI scheme of Key Vault keys:
// azurekv://VAULT.vault.azure.net/keys/NAME/VERSION.
const Scheme = "azurekv"

// DefaultRateLimit is the per-key signing rate when Config.RateLimit is 0.
// Key Vault allows 2,000 RSA-2048 or 1,000 EC operations per 10 seconds
// per vault (fewer for larger RSA keys and HSM keys); 100/s for one key
// leaves room for the vault's other users.
const DefaultRateLimit = 100

// DefaultAttemptTimeout bounds one request when Config.AttemptTimeout is 0.
const DefaultAttemptTimeout = 10 * time.Second

// AzureHosts returns the host suffixes of Key Vault and Managed HSM in
// Azure's clouds: the hosts a key URI may name when Config.AllowedHosts is
// empty. The backend sends its access tokens to these hosts only.
func AzureHosts() []string {
	return []string{
		".vault.azure.net", ".managedhsm.azure.net", // public cloud
		".vault.azure.cn", ".managedhsm.azure.cn", // China
		".vault.usgovcloudapi.net", ".managedhsm.usgovcloudapi.net", // US Government
	}
}

// Config configures a Backend. The zero value signs with keys in any vault
// of Azure's clouds, with credentials from the environment, workload
// identity or managed identity, and cannot create keys.
type Config struct {
	// AllowedHosts are the vault hosts key URIs may name: exact host[:port]
	// values, or suffixes starting with '.'; empty means AzureHosts(). A URI
	// naming another host is refused before any request, so that a URI
	// cannot make the backend send its token elsewhere.
	AllowedHosts []string
	// Key is the key Create adds versions to:
	// azurekv://VAULT.vault.azure.net/keys/NAME (no version). "" means
	// the backend cannot create keys.
	Key string
	// HSM makes Create ask for HSM-protected keys (EC-HSM, RSA-HSM: a
	// Premium vault or a Managed HSM).
	HSM bool
	// RSABits is the size of the RSA keys Create makes: 2048, 3072
	// (default) or 4096.
	RSABits int
	// Credential names the credential source: "" (environment, then
	// workload identity, then managed identity: the first that is
	// configured), "environment", "workload", "managed".
	Credential string
	// ManagedIdentityClientID selects a user-assigned managed identity.
	ManagedIdentityClientID string
	// RateLimit caps signatures per second per key (a token bucket holding
	// a second's worth); 0 means DefaultRateLimit, +Inf none.
	RateLimit float64
	// AttemptTimeout bounds each request; 0 means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// Logger receives key creation, disables (Info), retries (Debug) and
	// give-ups (Warn); nil means slog.Default(). Tokens are never logged.
	Logger *slog.Logger
	// HTTPClient, if set, sends every request, Key Vault's and the
	// credential's (tests: a client trusting a fake's CA).
	HTTPClient *http.Client
	// TokenCredential (an azcore.TokenCredential), if set, replaces the
	// credential Credential names (tests, programs with their own).
	TokenCredential tokenCredential
}
