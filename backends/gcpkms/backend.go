//go:build !nogcpkms

package gcpkms

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	kms "cloud.google.com/go/kms/apiv1"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/internal/kmsstats"
	"github.com/cardsign/cardsign/backends/internal/retry"
	"github.com/cardsign/cardsign/ratelimit"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Backend opens, creates and disables Cloud KMS key versions. It is safe
// for concurrent use; one Backend (one gRPC connection) serves every key.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	client *kms.KeyManagementClient
	retry  *retry.Policy
	stats  kmsstats.Counters
	closed atomic.Bool
	// limits are the per-key-version rate limiters, by version name,
	// shared by everything that signs with a version through this Backend.
	limits *ratelimit.Limiter
}

var (
	_ backends.Backend = (*Backend)(nil)
	_ backends.Creator = (*Backend)(nil)
)

// New connects a Backend to Cloud KMS (or cfg.Endpoint). Credentials come
// from cfg.ClientOptions, else the standard chain; none are sent to an
// Insecure endpoint. The caller registers it:
//
//	reg := backends.NewRegistry()
//	reg.Add(gcpkms.Scheme, gcpkms.Constructor, backends.Config{Settings: cfg})
//	defer reg.Close()
func New(ctx context.Context, cfg Config) (*Backend, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	opts := []option.ClientOption{option.WithGRPCConnectionPool(connPoolSize)}
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.Endpoint))
	}
	if cfg.Insecure {
		opts = append(opts,
			option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	opts = append(opts, cfg.ClientOptions...)
	client, err := kms.NewKeyManagementClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcpkms: Cloud KMS client: %w", err)
	}
	// The library's defaults retry UNAVAILABLE and DEADLINE_EXCEEDED itself
	// (up to a 60s timeout) and never RESOURCE_EXHAUSTED. Clearing them
	// leaves one retry loop, ours (call.go), which sees every attempt,
	// paces it with the rate limit and never waits past the deadline.
	client.CallOptions = &kms.KeyManagementCallOptions{}
	b := &Backend{
		cfg:    cfg,
		log:    cfg.Logger,
		client: client,
		limits: ratelimit.New(cfg.RateLimit, ratelimit.BurstFor(cfg.RateLimit, burstWindow)),
	}
	b.retry = b.retryPolicy()
	return b, nil
}

// Close closes the connection to Cloud KMS. Calls afterwards, and signers
// opened before, fail with an *UnavailableError wrapping ErrClosed.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	if err := b.client.Close(); err != nil {
		return fmt.Errorf("gcpkms: close: %w", err)
	}
	b.log.Info("gcpkms: backend closed")
	return nil
}

// connPoolSize is the number of gRPC connections to Cloud KMS. Google's
// front ends allow about 100 concurrent streams per HTTP/2 connection, and
// each connection reads and writes its frames on one goroutine: several
// connections let a burst of signatures go out, and their answers come
// back, in parallel. ClientOptions may override it.
const connPoolSize = 4

// NotBuilt is empty: this build has the gcpkms backend (no_gcpkms.go is
// the stub of a build without it).
const NotBuilt = ""

// Constructor builds this backend for a backends.Registry from a Config
// whose Settings is a Config.
func Constructor(ctx context.Context, cfg backends.Config) (backends.Backend, error) {
	return backends.Construct(ctx, Scheme, cfg, New)
}
