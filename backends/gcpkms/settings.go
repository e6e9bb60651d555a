package gcpkms

// This file is built whatever the build tags: what a binary needs to
// register the backend (Scheme, Config) is here, and the rest of the
// package, or its stub in no_gcpkms.go, supplies Constructor and NotBuilt.

import (
	"log/slog"
	"time"
)

// Scheme is the URI scheme of Cloud KMS key versions:
// gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K/cryptoKeyVersions/N.
const Scheme = "gcpkms"

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
	// ClientOptions (option.ClientOption values) are passed to the Cloud
	// KMS client after the options above, e.g. option.WithCredentialsFile. Without them the standard
	// credential chain is used.
	ClientOptions []clientOption
}
