package awskms

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/cardsign/cardsign/backends"
)

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
	// AWSConfig, if set, supplies credentials, HTTP client and the like; it
	// is copied. nil loads the standard chain with config.LoadDefaultConfig.
	// Its retryer is not used: the backend owns retries (see the package
	// comment). An SDK BuildableClient (or none) gets an idle connection
	// pool of 256 per host instead of 10; other HTTP clients are used as
	// they are.
	AWSConfig *aws.Config
}

// normalize checks c and returns it with defaults filled in.
func (c Config) normalize() (Config, error) {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			return Config{}, fmt.Errorf("awskms: endpoint %q is not an http(s)://HOST[:PORT] URL without user info", backends.Redact(c.Endpoint))
		}
	}
	if c.KeySpec != "" && !slices.Contains(supportedKeySpecs(), types.KeySpec(c.KeySpec)) {
		return Config{}, fmt.Errorf("awskms: KeySpec %q is not supported (supported: %s)", c.KeySpec, joinSpecs(supportedKeySpecs()))
	}
	if c.Alias != "" {
		if !strings.HasPrefix(c.Alias, "alias/") {
			c.Alias = "alias/" + c.Alias
		}
		name := strings.TrimPrefix(c.Alias, "alias/")
		if !validAliasName(name) {
			return Config{}, fmt.Errorf("awskms: alias %q is invalid (want alias/ followed by letters, digits, /, _ or -)", c.Alias)
		}
		if strings.HasPrefix(name, "aws/") {
			return Config{}, fmt.Errorf("awskms: alias %q is reserved for AWS managed keys", c.Alias)
		}
	}
	switch {
	case math.IsNaN(c.RateLimit) || c.RateLimit < 0:
		return Config{}, fmt.Errorf("awskms: rate limit %v is not a positive number of signatures per second", c.RateLimit)
	case c.RateLimit == 0:
		c.RateLimit = DefaultRateLimit
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// awsConfig returns the SDK configuration: a copy of c.AWSConfig, or the
// standard chain's, with c.Region applied. It does not fetch credentials:
// the chain resolves them on the first request, so New never blocks on IMDS.
func (c Config) awsConfig(ctx context.Context) (aws.Config, error) {
	var ac aws.Config
	if c.AWSConfig != nil {
		ac = c.AWSConfig.Copy()
	} else {
		var opts []func(*config.LoadOptions) error
		if c.Region != "" {
			opts = append(opts, config.WithRegion(c.Region))
		}
		var err error
		if ac, err = config.LoadDefaultConfig(ctx, opts...); err != nil {
			return aws.Config{}, fmt.Errorf("awskms: load AWS configuration: %w", err)
		}
	}
	if c.Region != "" {
		ac.Region = c.Region
	}
	if ac.Region == "" {
		return aws.Config{}, fmt.Errorf("awskms: no AWS Region: set the backend's region, AWS_REGION, or region in the shared config")
	}
	if ac.Credentials == nil {
		return aws.Config{}, fmt.Errorf("awskms: the AWS configuration has no credentials provider")
	}
	return ac, nil
}
