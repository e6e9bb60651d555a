//go:build !noawskms

package awskms

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/internal/kmsstats"
	"github.com/cardsign/cardsign/backends/internal/retry"
	"github.com/cardsign/cardsign/ratelimit"
)

// maxIdleConnsPerHost replaces the SDK's default of 10 idle connections per
// host: with more concurrent signatures than that, every request beyond
// the tenth would open (and, with TLS, handshake) a new connection.
const maxIdleConnsPerHost = 256

// Backend opens, creates and disables AWS KMS keys. It is safe for
// concurrent use; a process needs one per set of credentials.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	awsCfg aws.Config
	region string
	// transport is the HTTP transport New made when the configuration had
	// no HTTP client, so that Close can drop its idle connections; nil when
	// the configuration's client is used.
	transport *http.Transport
	stats     kmsstats.Counters
	retry     *retry.Policy
	// limits are the per-key rate limiters, by key ARN (Open resolves
	// aliases and key IDs to it), shared by every signer of a key.
	limits *ratelimit.Limiter
	closed atomic.Bool

	mu      sync.Mutex // guards clients
	clients map[string]*kms.Client
}

var (
	_ backends.Backend = (*Backend)(nil)
	_ backends.Creator = (*Backend)(nil)
)

// New returns a Backend for cfg. It loads the AWS configuration but makes
// no request: credentials and keys are checked when a key is opened. The
// caller registers it for the awskms scheme:
//
//	reg := backends.NewRegistry()
//	reg.Add(awskms.Scheme, awskms.Constructor, backends.Config{Settings: awskms.Config{Region: "eu-west-1"}})
//	defer reg.Close()
func New(ctx context.Context, cfg Config) (*Backend, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	ac, err := cfg.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg:     cfg,
		log:     cfg.Logger,
		region:  ac.Region,
		clients: map[string]*kms.Client{},
		limits:  ratelimit.New(cfg.RateLimit, ratelimit.BurstFor(cfg.RateLimit, burstWindow)),
	}
	b.retry = b.retryPolicy()
	switch hc := ac.HTTPClient.(type) {
	case nil:
		// The SDK's default transport (proxy from the environment, TLS 1.2+,
		// its timeouts) with a larger idle pool.
		b.transport = awshttp.NewBuildableClient().GetTransport()
		b.transport.MaxIdleConnsPerHost = maxIdleConnsPerHost
		ac.HTTPClient = &http.Client{Transport: b.transport}
	case *awshttp.BuildableClient:
		// The standard chain makes one for AWS_CA_BUNDLE; keep its settings
		// (WithTransportOptions copies) but not the small idle pool.
		ac.HTTPClient = hc.WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, maxIdleConnsPerHost)
		})
	}
	b.awsCfg = ac
	b.clients[b.region] = b.newClient(b.region)
	return b, nil
}

// newClient returns a KMS client for region with the SDK's retries turned
// off (aws.NopRetryer), so that each request the SDK sends is one attempt
// of the backend's own retry loop (backends/internal/retry, driven from
// retry.go). That loop waits on the per-key rate limit before every
// attempt, counts attempts and throttling for the metrics, gives up early
// when the next pause would pass the deadline, and retries CreateKey only
// after throttling; the SDK's standard retryer does none of that, and left
// under ours it would multiply the attempts (up to 3 of its own for each
// of ours). Its retry quota (the client-wide token bucket that fails
// requests with "retry quota exceeded" once throttling has drained it) is
// not the reason: that alone could be switched off with ratelimit.None as
// the standard retryer's RateLimiter.
func (b *Backend) newClient(region string) *kms.Client {
	return kms.NewFromConfig(b.awsCfg, func(o *kms.Options) {
		o.Region = region
		if b.cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(b.cfg.Endpoint)
		}
		o.Retryer = aws.NopRetryer{}
		// A non-zero RetryMaxAttempts (AWS_MAX_ATTEMPTS) would wrap the
		// retryer again; NopRetryer never retries, but keep it plain.
		o.RetryMaxAttempts = 0
		// The SDK's request and signing logs include the Authorization
		// header (access key ID, signed headers) and bodies; never turn
		// them on from a configuration we were handed.
		o.ClientLogMode = 0
	})
}

// clientFor returns the client for a key in region ("" for the backend's).
func (b *Backend) clientFor(region string) (*kms.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if region == "" {
		region = b.region
	}
	if c, ok := b.clients[region]; ok {
		return c, nil
	}
	if b.cfg.Endpoint != "" {
		return nil, fmt.Errorf("awskms: key in Region %s, but the endpoint override %s serves Region %s; use a key of that Region or another backend",
			region, b.cfg.Endpoint, b.region)
	}
	c := b.newClient(region)
	b.clients[region] = c
	return c, nil
}

// Close makes every later call fail with an *UnavailableError whose Reason
// is ErrClosed, and drops idle connections. Signatures in flight finish.
// It is safe to call more than once.
func (b *Backend) Close() error {
	b.closed.Store(true)
	if b.transport != nil {
		b.transport.CloseIdleConnections()
	}
	return nil
}

// closedErr is the error of a call on a closed Backend.
func (b *Backend) closedErr(op, key string) error {
	return &UnavailableError{Op: op, Key: key, Reason: ErrClosed}
}

// NotBuilt is empty: this build has the awskms backend (no_awskms.go is
// the stub of a build without it).
const NotBuilt = ""

// Constructor builds this backend for a backends.Registry from a Config
// whose Settings is a Config.
func Constructor(ctx context.Context, cfg backends.Config) (backends.Backend, error) {
	return backends.Construct(ctx, Scheme, cfg, New)
}
