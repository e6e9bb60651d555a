package gcpkms

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"
	"time"

	"google.golang.org/api/option"
)

// DefaultRateLimit is the per-key-version signature rate when
// Config.RateLimit is 0: well under Cloud KMS's default quota for
// cryptographic requests (per project and region), so a few daemons
// sharing a project do not throttle each other.
const DefaultRateLimit = 100

// DefaultAttemptTimeout bounds one call to Cloud KMS when
// Config.AttemptTimeout is 0. A sign normally answers within tens of
// milliseconds (HSM keys within a few hundred); a call that takes far longer
// is stuck, and a fresh attempt (on a fresh stream) is likelier to succeed
// than waiting on it.
const DefaultAttemptTimeout = 10 * time.Second

// Config configures a Backend. The zero value talks to the public Cloud KMS
// endpoint with the standard credential chain (Application Default
// Credentials) and cannot create keys.
type Config struct {
	// Endpoint overrides the service address (host:port): a Private Service
	// Connect endpoint, or a test fake. "" is the default endpoint.
	Endpoint string
	// Insecure speaks plaintext gRPC to Endpoint, without credentials. Only
	// loopback endpoints (test fakes) are allowed: credentials must never
	// travel in clear, and nothing else should be trusted without TLS.
	Insecure bool
	// CryptoKey is the CryptoKey (projects/P/locations/L/keyRings/R/
	// cryptoKeys/K, with or without the gcpkms:// prefix) that Create adds
	// versions to. Its purpose must be ASYMMETRIC_SIGN; its version template
	// decides the algorithm of new versions.
	CryptoKey string
	// RateLimit is the number of signatures per second per key version
	// (a token bucket holding one second's worth); 0 means DefaultRateLimit
	// and +Inf means no limit.
	RateLimit float64
	// AttemptTimeout bounds each call to Cloud KMS; a call that runs out
	// of it is retried (as DEADLINE_EXCEEDED) within the caller's deadline.
	// 0 means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// Logger receives key and retry events; nil means slog.Default().
	Logger *slog.Logger
	// ClientOptions are passed to the Cloud KMS client after the options
	// above, e.g. option.WithCredentialsFile. Without them the standard
	// credential chain is used.
	ClientOptions []option.ClientOption
}

// normalize checks c and returns it with defaults filled in.
func (c Config) normalize() (Config, error) {
	switch {
	case math.IsNaN(c.RateLimit) || c.RateLimit < 0:
		return Config{}, fmt.Errorf("gcpkms: rate limit %v must be positive (0 for the default of %d/s)", c.RateLimit, DefaultRateLimit)
	case c.RateLimit == 0:
		c.RateLimit = DefaultRateLimit
	}
	switch {
	case c.AttemptTimeout < 0:
		return Config{}, fmt.Errorf("gcpkms: attempt timeout %v is negative", c.AttemptTimeout)
	case c.AttemptTimeout == 0:
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.Insecure {
		if err := checkLoopback(c.Endpoint); err != nil {
			return Config{}, err
		}
	}
	if c.CryptoKey != "" {
		k, err := parseCryptoKey(c.CryptoKey)
		if err != nil {
			return Config{}, fmt.Errorf("gcpkms: crypto key: %w", err)
		}
		c.CryptoKey = k
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// checkLoopback refuses an insecure endpoint that is not host:port on the
// loopback interface.
func checkLoopback(endpoint string) error {
	if endpoint == "" {
		return fmt.Errorf("gcpkms: insecure needs an endpoint (a loopback host:port)")
	}
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return fmt.Errorf("gcpkms: endpoint %q: %w", endpoint, err)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("gcpkms: insecure (plaintext) endpoint %q refused: only loopback endpoints may be insecure", endpoint)
}
