//go:build !nogcpkms

package gcpkms

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"

	"google.golang.org/api/option"
)

// clientOption is the element type of Config.ClientOptions:
// option.ClientOption. A build without the backend (no_gcpkms.go) makes it
// an empty interface, so that Config needs nothing of the Google API client
// there.
type clientOption = option.ClientOption

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
