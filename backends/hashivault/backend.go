//go:build !novault

package hashivault

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/internal/kmsstats"
	"github.com/cardsign/cardsign/backends/internal/retry"
	"github.com/cardsign/cardsign/ratelimit"
)

// Retry pacing, as the other KMS backends: full jitter from 50ms to 2s,
// and 30s for a call whose context has no deadline.
const (
	minBackoff         = 50 * time.Millisecond
	maxBackoff         = 2 * time.Second
	unboundedCallLimit = 30 * time.Second
	burstWindow        = time.Second
	// maxIdleConnsPerHost replaces cleanhttp's GOMAXPROCS+1: with more
	// concurrent signatures than that, every request beyond would open and
	// handshake a new connection.
	maxIdleConnsPerHost = 256
)

// Backend opens and creates Transit keys of one Vault (or OpenBao) cluster
// and namespace. It is safe for concurrent use.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	client *api.Client
	stats  kmsstats.Counters
	retry  *retry.Policy
	limits *ratelimit.Limiter
	closed atomic.Bool
	sess   *session

	stop context.CancelFunc // ends the renewal loop
	wg   sync.WaitGroup
}

var (
	_ backends.Backend = (*Backend)(nil)
	_ backends.Creator = (*Backend)(nil)
)

// New returns a Backend for cfg. It makes no request: the backend logs in
// at its first call and then keeps its token renewed (or logs in again)
// until Close.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	client, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg:    cfg,
		log:    cfg.Logger,
		client: client,
		limits: ratelimit.New(cfg.RateLimit, ratelimit.BurstFor(cfg.RateLimit, burstWindow)),
	}
	b.retry = b.retryPolicy()
	b.sess, err = newSession(b, cfg.Auth)
	if err != nil {
		return nil, err
	}
	loopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stop = stop
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.sess.renewLoop(loopCtx)
	}()
	return b, nil
}

// newClient makes the API client: retries off (the backend's loop owns
// them), no client-wide timeout (each attempt has its own), a larger idle
// pool, the configured CA, namespace and address.
func newClient(cfg Config) (*api.Client, error) {
	ac := api.DefaultConfig() // reads BAO_*/VAULT_* from the environment
	if ac.Error != nil {
		return nil, fmt.Errorf("hashivault: client configuration from the environment: %w", ac.Error)
	}
	ac.Address = cfg.Address
	// Only the configured address gets the token: not a Vault Agent named
	// by BAO_AGENT_ADDR / VAULT_AGENT_ADDR, and not a host a redirect names.
	ac.AgentAddress = ""
	ac.DisableRedirects = true
	ac.MaxRetries = 0
	ac.Timeout = 0
	if t, ok := ac.HttpClient.Transport.(*http.Transport); ok && t.TLSClientConfig != nil && t.TLSClientConfig.InsecureSkipVerify {
		return nil, fmt.Errorf("hashivault: BAO_SKIP_VERIFY / VAULT_SKIP_VERIFY is set: cardsignd does not send its token to a Vault whose certificate it does not check; set hashivault.ca_file (or VAULT_CACERT) instead")
	}
	if cfg.HTTPClient != nil {
		ac.HttpClient = cfg.HTTPClient
	} else if t, ok := ac.HttpClient.Transport.(*http.Transport); ok {
		t.MaxIdleConnsPerHost = maxIdleConnsPerHost
	}
	if cfg.CAFile != "" {
		if err := ac.ConfigureTLS(&api.TLSConfig{CACert: cfg.CAFile}); err != nil {
			return nil, fmt.Errorf("hashivault: CA file %s: %w", cfg.CAFile, err)
		}
	}
	client, err := api.NewClient(ac)
	if err != nil {
		return nil, fmt.Errorf("hashivault: client: %w", err)
	}
	client.ClearToken() // NewClient took BAO_TOKEN / VAULT_TOKEN; the session decides
	client.SetNamespace(cfg.Namespace)
	return client, nil
}

// normalize checks c and returns it with defaults and the environment's
// values filled in.
func (c Config) normalize() (Config, error) {
	c.Address = cmp.Or(c.Address, api.ReadBaoVariable(api.EnvVaultAddress))
	if c.Address == "" {
		return Config{}, fmt.Errorf("hashivault: no Vault address: set the backend's address, BAO_ADDR or VAULT_ADDR")
	}
	u, err := url.Parse(c.Address)
	if err != nil || u.Host == "" || u.User != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return Config{}, fmt.Errorf("hashivault: address %q is not an http(s)://HOST[:PORT] URL without user info", backends.Redact(c.Address))
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return Config{}, fmt.Errorf("hashivault: address %s is plain http to a host that is not loopback: the Vault token would travel in clear; use https", u.Redacted())
	}
	c.Namespace = cmp.Or(c.Namespace, api.ReadBaoVariable(api.EnvVaultNamespace))
	c.Mount = cmp.Or(c.Mount, DefaultMount)
	if !validPath(c.Mount) {
		return Config{}, fmt.Errorf("hashivault: mount %q is not a path of letters, digits, '_', '-', '.' and '/'", c.Mount)
	}
	if c.Key != "" && !validName(c.Key) {
		return Config{}, fmt.Errorf("hashivault: key %q is not 1-128 letters, digits, '_', '-' or '.'", c.Key)
	}
	switch {
	case math.IsNaN(c.RateLimit) || c.RateLimit < 0:
		return Config{}, fmt.Errorf("hashivault: rate limit %v is not a positive number of signatures per second", c.RateLimit)
	case c.RateLimit == 0:
		c.RateLimit = DefaultRateLimit
	}
	c.AttemptTimeout = cmp.Or(c.AttemptTimeout, DefaultAttemptTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// validPath reports whether s is a mount path: names as validName, joined
// by single slashes.
func validPath(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '/' {
			if !validName(s[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return true
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Close stops the token renewal and makes every later call fail with an
// *UnavailableError wrapping ErrClosed. The token is not revoked: a
// replica restarting logs in again, and the token expires by itself.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.stop()
	b.wg.Wait()
	return nil
}

// Stats returns the counters since New, for /metrics.
func (b *Backend) Stats() kmsstats.Stats { return b.stats.Snapshot() }

// NotBuilt is empty: this build has the hashivault backend
// (no_hashivault.go is the stub of a build without it).
const NotBuilt = ""

// Constructor builds this backend for a backends.Registry from a Config
// whose Settings is a Config.
func Constructor(ctx context.Context, cfg backends.Config) (backends.Backend, error) {
	return backends.Construct(ctx, Scheme, cfg, New)
}
