package awskms

// This file is built whatever the build tags: what a binary needs to
// register the backend (Scheme, Config) is here, and the rest of the
// package, or its stub in no_awskms.go, supplies Constructor and NotBuilt.

import (
	"log/slog"
)

// Scheme is the URI scheme this backend serves.
const Scheme = "awskms"

// DefaultRateLimit is the per-key signing rate when Config.RateLimit is 0.
// AWS's request quotas for asymmetric Sign are per account and Region (in
// the hundreds per second, shared with every other user of the account), so
// one key staying at 100/s leaves room for the rest; raise it when KMS
// quotas were raised for cardsign.
const DefaultRateLimit = 100

// Config configures a Backend. The zero value works where the standard AWS
// chain (environment, shared config, IMDS/ECS/IRSA) supplies credentials
// and a Region.
type Config struct {
	// Endpoint overrides the KMS endpoint: a VPC endpoint, a FIPS endpoint,
	// or a test fake (http://127.0.0.1:PORT). "" means the default for the
	// Region. With an override, keys in other Regions are refused: the
	// endpoint serves one Region.
	Endpoint string
	// Region is where the backend's keys live and Create makes new ones.
	// "" takes it from the standard chain (AWS_REGION, shared config); New
	// fails when that gives none. Key ARNs in URIs name their own Region.
	Region string
	// KeySpec is what Create makes: ECC_NIST_P256, ECC_NIST_P384,
	// ECC_NIST_P521, RSA_2048, RSA_3072, RSA_4096 or ECC_NIST_EDWARDS25519.
	// It must fit the alg asked for. "" picks by alg (RSA_3072 for RS256
	// and PS256).
	KeySpec string
	// Alias, if set ("alias/NAME" or "NAME"), is moved to every key Create
	// makes, so that awskms:///alias/NAME always names the newest key.
	Alias string
	// RateLimit caps signatures per second per key (a token bucket, burst
	// a tenth of a second's worth); 0 means DefaultRateLimit, +Inf none.
	// Retries count against it, as they count against the KMS quota.
	RateLimit float64
	// Logger receives key creation, alias moves, disables (Info), retries
	// (Debug) and give-ups (Warn); nil means slog.Default(). Credentials are
	// never logged.
	Logger *slog.Logger
	// AWSConfig (an *aws.Config), if set, supplies credentials, HTTP
	// client and the like; it is copied. nil loads the standard chain with
	// config.LoadDefaultConfig.
	// Its retryer is not used: the backend owns retries (see the package
	// comment). An SDK BuildableClient (or none) gets an idle connection
	// pool of 256 per host instead of 10; other HTTP clients are used as
	// they are.
	AWSConfig *sdkConfig
}
