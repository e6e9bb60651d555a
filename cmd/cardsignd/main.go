// Command cardsignd is the cardsign signing authority: a gRPC service that
// signs Agent Cards with keys it manages, records every signature in a
// hash-chained audit log, and publishes the JWKS and revocation document
// clients verify against.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/awskms"
	_ "github.com/cardsign/cardsign/backends/file" // file: keys
	"github.com/cardsign/cardsign/backends/gcpkms"
	"github.com/cardsign/cardsign/backends/pkcs11"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/store/sqlite"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("cardsignd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "YAML config file (every field optional; see README)")
	checkConfig := fs.String("check-config", "", "validate this config file, report every problem, and exit")
	dataDir := fs.String("data-dir", "", "data directory (overrides data_dir; default ./cardsignd-data)")
	grpcAddr := fs.String("grpc-addr", "", "gRPC listen address (overrides grpc_addr; default 127.0.0.1:7700)")
	httpAddr := fs.String("http-addr", "", "HTTP listen address for the JWKS, revocations and health (overrides http_addr; default 127.0.0.1:7701)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (overrides log_level)")
	prepublish := fs.String("prepublish", "", "how long a rotated key is published before it signs, e.g. 1h or 0s (overrides keys.prepublish)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: cardsignd [flags]\n\nWith no flags, keeps everything in ./cardsignd-data, creates and activates an ES256 key on first start,\nand serves gRPC on 127.0.0.1:7700 and HTTP on 127.0.0.1:7701.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *checkConfig != "" {
		cfg, err := loadConfig(*checkConfig)
		if err == nil {
			err = cfg.validate()
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintf(stderr, "%s: ok\n", *checkConfig)
		return 0
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	for _, o := range []struct {
		flag string
		dst  *string
	}{{*dataDir, &cfg.DataDir}, {*grpcAddr, &cfg.GRPCAddr}, {*httpAddr, &cfg.HTTPAddr}, {*logLevel, &cfg.LogLevel}} {
		if o.flag != "" {
			*o.dst = o.flag
		}
	}
	if *prepublish != "" {
		d, err := time.ParseDuration(*prepublish)
		if err != nil {
			fmt.Fprintf(stderr, "--prepublish: %v\n", err)
			return 2
		}
		cfg.Keys.Prepublish = d
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, cfg, log); err != nil {
		log.Error("cardsignd stopped", "err", err)
		return 1
	}
	return 0
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(strings.ToUpper(cfg.LogLevel)))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// openPKCS11 configures the pkcs11: backend. The PIN comes from pin_file or
// the environment, never from the config file.
func openPKCS11(c PKCS11Config, log *slog.Logger) (*pkcs11.Backend, error) {
	pin := os.Getenv(pinEnv)
	if c.PINFile != "" {
		data, err := os.ReadFile(c.PINFile)
		if err != nil {
			return nil, fmt.Errorf("pkcs11.pin_file: %w", err)
		}
		pin = strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	}
	allowed := c.AllowedModules
	if len(allowed) == 0 && c.Module != "" {
		allowed = []string{c.Module}
	}
	b, err := pkcs11.New(pkcs11.Config{AllowedModules: allowed, DefaultModule: c.Module, PIN: pin, Token: c.Token, PoolSize: c.PoolSize, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("pkcs11 backend: %w", err)
	}
	log.Info("pkcs11 backend ready", "module", c.Module, "token", c.Token)
	return b, nil
}

func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	for _, dir := range []string{cfg.DataDir, cfg.Keys.Dir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
	}
	dbPath := filepath.Join(cfg.DataDir, "cardsign.db")
	st, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		return err
	}
	defer st.Close()
	if cfg.PKCS11.enabled() {
		b, err := openPKCS11(cfg.PKCS11, log)
		if err != nil {
			return err
		}
		defer b.Close()
		backends.Register(pkcs11.Scheme, b)
	}
	var stats []server.StatsSource
	if cfg.GCPKMS.enabled() || cfg.Keys.Backend == gcpkms.Scheme {
		b, err := gcpkms.New(ctx, gcpkms.Config{Endpoint: cfg.GCPKMS.Endpoint, Insecure: cfg.GCPKMS.Insecure,
			CryptoKey: cfg.GCPKMS.CryptoKey, RateLimit: cfg.GCPKMS.RateLimit, Logger: log})
		if err != nil {
			return fmt.Errorf("gcpkms backend: %w", err)
		}
		defer b.Close()
		backends.Register(gcpkms.Scheme, b)
		stats = append(stats, server.StatsSource{Backend: gcpkms.Scheme, Read: func() server.BackendStats {
			s := b.Stats()
			return server.BackendStats{Attempts: s.Attempts, Throttled: s.Throttled, Retries: s.Retries, Failures: s.Failures,
				LatencyCount: s.Latency.Count, LatencyTotal: s.Latency.Total, LatencyMax: s.Latency.Max}
		}})
		log.Info("gcpkms backend ready", "endpoint", cfg.GCPKMS.Endpoint, "crypto_key", cfg.GCPKMS.CryptoKey)
	}
	if cfg.AWSKMS.enabled() || cfg.Keys.Backend == awskms.Scheme {
		b, err := awskms.New(ctx, awskms.Config{Endpoint: cfg.AWSKMS.Endpoint, Region: cfg.AWSKMS.Region,
			KeySpec: cfg.AWSKMS.KeySpec, Alias: cfg.AWSKMS.Alias, RateLimit: cfg.AWSKMS.RateLimit, Logger: log})
		if err != nil {
			return fmt.Errorf("awskms backend: %w", err)
		}
		defer b.Close()
		backends.Register(awskms.Scheme, b)
		stats = append(stats, server.StatsSource{Backend: awskms.Scheme, Read: func() server.BackendStats {
			s := b.Stats()
			return server.BackendStats{Attempts: s.Attempts, Throttled: s.Throttled, Retries: s.Retries, Failures: s.Failures,
				LatencyCount: s.Latency.Count, LatencyTotal: s.Latency.Total, LatencyMax: s.Latency.Max}
		}})
		log.Info("awskms backend ready", "endpoint", cfg.AWSKMS.Endpoint, "region", cfg.AWSKMS.Region)
	}
	alg, _ := jose.ParseAlg(cfg.Keys.DefaultAlg)
	auth := server.NewAuthority(server.Config{
		KeyBackend:    cfg.Keys.Backend,
		KeyDir:        cfg.Keys.Dir,
		DefaultAlg:    alg,
		Prepublish:    cfg.Keys.Prepublish,
		RetireGrace:   cfg.Keys.RetireGrace,
		JKU:           cfg.Signing.JKU,
		Limits:        card.Limits{MaxBytes: cfg.Signing.MaxCardBytes, MaxDepth: cfg.Signing.MaxCardDepth},
		JWKSMaxAge:    cfg.JWKS.MaxAge,
		RevocationTTL: cfg.Revocations.TTL,
		AuditBatch:    cfg.Audit.BatchSize,

		DisableOnRevoke: cfg.Keys.OnRevoke == "disable",
	}, st, log)
	if _, err := auth.Bootstrap(ctx); err != nil {
		return fmt.Errorf("first key: %w", err)
	}
	// Every key that may still sign or be disabled needs its backend: a
	// missing section would otherwise surface only when signing fails.
	if err := auth.CheckBackends(ctx); err != nil {
		return err
	}

	gl, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("gRPC listener: %w", err)
	}
	hl, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		gl.Close()
		return fmt.Errorf("HTTP listener: %w", err)
	}
	for _, l := range []net.Listener{gl, hl} {
		if ap, ok := l.Addr().(*net.TCPAddr); !ok || !ap.IP.IsLoopback() {
			gl.Close()
			hl.Close()
			return fmt.Errorf("%s resolved to a non-loopback address; this version listens on loopback only", l.Addr())
		}
	}
	if cfg.Keys.Prepublish < cfg.JWKS.MaxAge {
		log.Warn("keys.prepublish is shorter than jwks.max_age: verifiers holding a cached JWKS may not know a rotated key when it starts signing",
			"prepublish", cfg.Keys.Prepublish, "jwks_max_age", cfg.JWKS.MaxAge)
	}
	gs, hs := server.NewGRPCServer(auth, log)
	httpSrv := &http.Server{Handler: server.NewHTTPHandler(auth, stats...), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- gs.Serve(gl) }()
	go func() { errc <- httpSrv.Serve(hl) }()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)

	log.Warn("listening on loopback only, without TLS or authentication (the embedded default)")
	log.Info("cardsignd ready",
		"grpc", gl.Addr().String(), "http", hl.Addr().String(),
		"jwks", "http://"+hl.Addr().String()+jwks.JWKSPath,
		"data_dir", cfg.DataDir, "database", dbPath, "key_dir", cfg.Keys.Dir, "key_backend", cfg.Keys.Backend,
		"backends", strings.Join(backends.Schemes(), ","))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		log.Error("listener failed; shutting down", "err", serveErr)
	}
	log.Info("shutting down: finishing in-flight signatures and their audit records")
	auth.Drain()
	hs.Shutdown()
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(cfg.ShutdownTimeout):
		log.Warn("shutdown timeout: stopping the remaining calls")
		gs.Stop()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = httpSrv.Shutdown(sctx)
	if err := auth.Close(); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	log.Info("stopped")
	return serveErr
}
