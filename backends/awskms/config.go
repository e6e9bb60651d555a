//go:build !noawskms

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

// sdkConfig is the type of Config.AWSConfig: aws.Config. A build without
// the backend (no_awskms.go) makes it an empty struct, so that Config needs
// nothing of the AWS SDK there.
type sdkConfig = aws.Config

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
