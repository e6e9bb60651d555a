//go:build !noazurekv

package azurekv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/internal/kmsstats"
	"github.com/cardsign/cardsign/backends/internal/retry"
	"github.com/cardsign/cardsign/ratelimit"
)

// tokenCredential is the type of Config.TokenCredential. A build without
// the backend (no_azurekv.go) makes it any, so that Config needs nothing
// of the Azure SDK there.
type tokenCredential = azcore.TokenCredential

// Retry pacing, as the other KMS backends.
const (
	minBackoff          = 50 * time.Millisecond
	maxBackoff          = 2 * time.Second
	unboundedCallLimit  = 30 * time.Second
	burstWindow         = time.Second
	maxIdleConnsPerHost = 256
)

// Backend opens, creates and disables Key Vault keys with one credential.
// It is safe for concurrent use.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	cred   azcore.TokenCredential
	http   *http.Client
	stats  kmsstats.Counters
	retry  *retry.Policy
	limits *ratelimit.Limiter
	closed atomic.Bool
	create keyRef // Config.Key parsed; name "" when not set

	mu      sync.Mutex // guards clients
	clients map[string]*azkeys.Client
}

var (
	_ backends.Backend  = (*Backend)(nil)
	_ backends.Creator  = (*Backend)(nil)
	_ backends.Disabler = (*Backend)(nil)
)

// New returns a Backend for cfg. It makes no request: the credential gets
// its first token when the first key is opened.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg:     cfg,
		log:     cfg.Logger,
		clients: map[string]*azkeys.Client{},
		limits:  ratelimit.New(cfg.RateLimit, ratelimit.BurstFor(cfg.RateLimit, burstWindow)),
		http:    cfg.HTTPClient,
	}
	if b.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = maxIdleConnsPerHost
		b.http = &http.Client{Transport: t}
	}
	if cfg.Key != "" {
		if b.create, err = parseURI(cfg.Key); err != nil {
			return nil, fmt.Errorf("azurekv: key: %w", err)
		}
		if b.create.version != "" || b.create.alg != "" {
			return nil, fmt.Errorf("azurekv: key %s: name the key without a version or query: Create adds versions to it", backends.Redact(cfg.Key))
		}
		if err := b.allowed(b.create.host); err != nil {
			return nil, err
		}
	}
	cred := cfg.TokenCredential
	if cred == nil {
		if cred, err = b.credential(); err != nil {
			return nil, err
		}
	}
	b.cred = vaultScoped{cred}
	b.retry = b.retryPolicy()
	return b, nil
}

// normalize checks c and returns it with defaults filled in.
func (c Config) normalize() (Config, error) {
	if len(c.AllowedHosts) == 0 {
		c.AllowedHosts = AzureHosts()
	}
	for _, h := range c.AllowedHosts {
		if !validHost(strings.TrimPrefix(strings.ToLower(h), ".")) || (strings.HasPrefix(h, ".") && strings.Count(h, ".") < 2) {
			return Config{}, fmt.Errorf("azurekv: allowed host %q is not a host[:port] or a .suffix of two labels or more (.vault.example.com)", h)
		}
	}
	c.RSABits = cmp.Or(c.RSABits, 3072)
	if !slices.Contains([]int{2048, 3072, 4096}, c.RSABits) {
		return Config{}, fmt.Errorf("azurekv: rsa_bits %d is not 2048, 3072 or 4096", c.RSABits)
	}
	if !slices.Contains([]string{"", "environment", "workload", "managed"}, c.Credential) {
		return Config{}, fmt.Errorf("azurekv: credential %q is not environment, workload or managed (or empty for the first configured)", c.Credential)
	}
	switch {
	case math.IsNaN(c.RateLimit) || c.RateLimit < 0:
		return Config{}, fmt.Errorf("azurekv: rate limit %v is not a positive number of signatures per second", c.RateLimit)
	case c.RateLimit == 0:
		c.RateLimit = DefaultRateLimit
	}
	c.AttemptTimeout = cmp.Or(c.AttemptTimeout, DefaultAttemptTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// credential makes the credential Config.Credential names: environment
// (AZURE_TENANT_ID, AZURE_CLIENT_ID and a secret or certificate), workload
// identity (AZURE_FEDERATED_TOKEN_FILE, as AKS injects), managed identity;
// by default the first of them that is configured, in that order.
func (b *Backend) credential() (azcore.TokenCredential, error) {
	co := azcore.ClientOptions{Transport: b.http}
	env := func() (azcore.TokenCredential, error) {
		return azidentity.NewEnvironmentCredential(&azidentity.EnvironmentCredentialOptions{ClientOptions: co})
	}
	workload := func() (azcore.TokenCredential, error) {
		return azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{ClientOptions: co})
	}
	managed := func() (azcore.TokenCredential, error) {
		o := &azidentity.ManagedIdentityCredentialOptions{ClientOptions: co}
		if b.cfg.ManagedIdentityClientID != "" {
			o.ID = azidentity.ClientID(b.cfg.ManagedIdentityClientID)
		}
		return azidentity.NewManagedIdentityCredential(o)
	}
	var cred azcore.TokenCredential
	var err error
	switch b.cfg.Credential {
	case "environment":
		cred, err = env()
	case "workload":
		cred, err = workload()
	case "managed":
		cred, err = managed()
	default:
		var chain []azcore.TokenCredential
		var errs []error
		for _, newCred := range []func() (azcore.TokenCredential, error){env, workload, managed} {
			c, err := newCred()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			chain = append(chain, c)
		}
		if len(chain) == 0 {
			return nil, fmt.Errorf("azurekv: no Azure credential is configured: %w", errors.Join(errs...))
		}
		cred, err = azidentity.NewChainedTokenCredential(chain, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("azurekv: %s credential: %w", cmp.Or(b.cfg.Credential, "default"), err)
	}
	return cred, nil
}

// vaultScoped hands out tokens for Key Vault and Managed HSM only. With
// the challenge's resource check off (a host outside Azure's domains) the
// host's 401 names the scope the SDK asks for; this keeps an allowed but
// compromised host from getting a token for another Azure API.
type vaultScoped struct{ azcore.TokenCredential }

// vaultScopes are the scopes of Key Vault and Managed HSM in Azure's clouds.
func vaultScopes() []string {
	return []string{
		"https://vault.azure.net/.default", "https://managedhsm.azure.net/.default",
		"https://vault.azure.cn/.default", "https://managedhsm.azure.cn/.default",
		"https://vault.usgovcloudapi.net/.default", "https://managedhsm.usgovcloudapi.net/.default",
	}
}

func (c vaultScoped) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	for _, sc := range opts.Scopes {
		if !slices.Contains(vaultScopes(), sc) {
			return azcore.AccessToken{}, fmt.Errorf("azurekv: the vault asked for a token of scope %q, which is not Key Vault's: refused", sc)
		}
	}
	return c.TokenCredential.GetToken(ctx, opts)
}

// allowed refuses a host the configuration does not allow.
func (b *Backend) allowed(host string) error {
	for _, h := range b.cfg.AllowedHosts {
		h = strings.ToLower(h)
		if host == h || (strings.HasPrefix(h, ".") && strings.HasSuffix(host, h) && len(host) > len(h)) {
			return nil
		}
	}
	return &HostError{Host: host, Allowed: b.cfg.AllowedHosts}
}

// azureHost reports whether host is under one of Azure's Key Vault
// domains, where the SDK checks that the token's resource matches.
func azureHost(host string) bool {
	h, _, _ := strings.Cut(host, ":")
	for _, s := range AzureHosts() {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// clientFor returns the client of a vault host, after checking it is
// allowed.
func (b *Backend) clientFor(host string) (*azkeys.Client, error) {
	if err := b.allowed(host); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.clients[host]; ok {
		return c, nil
	}
	c, err := azkeys.NewClient("https://"+host, b.cred, &azkeys.ClientOptions{
		ClientOptions: azcore.ClientOptions{
			Transport: b.http,
			// The backend's loop owns retries (backends/internal/retry):
			// each request the SDK sends is one attempt of it.
			Retry: policy.RetryOptions{MaxRetries: -1},
		},
		// Outside Azure's domains (a host listed in allowed_hosts, such as
		// a private endpoint's name) the resource cannot match the domain.
		DisableChallengeResourceVerification: !azureHost(host),
	})
	if err != nil {
		return nil, fmt.Errorf("azurekv: client for %s: %w", host, err)
	}
	b.clients[host] = c
	return c, nil
}

// Close makes every later call fail with an *UnavailableError wrapping
// ErrClosed, and drops idle connections.
func (b *Backend) Close() error {
	b.closed.Store(true)
	b.http.CloseIdleConnections()
	return nil
}

// Stats returns the counters since New, for /metrics.
func (b *Backend) Stats() kmsstats.Stats { return b.stats.Snapshot() }

// NotBuilt is empty: this build has the azurekv backend (no_azurekv.go is
// the stub of a build without it).
const NotBuilt = ""

// Constructor builds this backend for a backends.Registry from a Config
// whose Settings is a Config.
func Constructor(ctx context.Context, cfg backends.Config) (backends.Backend, error) {
	return backends.Construct(ctx, Scheme, cfg, New)
}
