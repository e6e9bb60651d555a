// Command cardsignd is the cardsign signing authority: a gRPC service that
// signs Agent Cards with keys it manages, records every signature in a
// hash-chained audit log, and publishes the JWKS and revocation document
// clients verify against.
package main

import (
	"context"
	"crypto/tls"
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
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/awskms"
	"github.com/cardsign/cardsign/backends/file" // file: keys (registers itself)
	"github.com/cardsign/cardsign/backends/gcpkms"
	"github.com/cardsign/cardsign/backends/pkcs11"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/ratelimit"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/tlsreload"
	"google.golang.org/grpc/credentials"
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
		if err == nil {
			err = cfg.reportStateDirs(stderr)
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
	b, err := pkcs11.New(pkcs11.Config{AllowedModules: allowed, DefaultModule: c.Module, PIN: pin, Token: c.Token, PoolSize: c.PoolSize,
		PINSourceDirs: c.PINSourceDirs, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("pkcs11 backend: %w", err)
	}
	log.Info("pkcs11 backend ready", "module", c.Module, "token", c.Token)
	return b, nil
}

func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	nofile, hardNofile, err := raiseFileLimit()
	if err != nil {
		log.Warn("could not raise the open file limit; connection limits are derived from the current one", "err", err, "nofile", nofile, "hard", hardNofile)
	} else {
		log.Info("open file limit", "nofile", nofile, "hard", hardNofile)
	}
	for _, dir := range []string{cfg.DataDir, cfg.Keys.Dir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
	}
	// MkdirAll keeps the mode of a directory that already exists.
	if err := cfg.checkStateDirs(log); err != nil {
		return err
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
	// Imported file keys must come from the key directory or a configured
	// import directory: an import names a path, and the daemon can read
	// files its callers cannot.
	fileKeys, err := file.New(file.Config{AllowedDirs: append([]string{cfg.Keys.Dir}, cfg.Keys.ImportDirs...)})
	if err != nil {
		return fmt.Errorf("keys.import_dirs: %w", err)
	}
	alg, _ := jose.ParseAlg(cfg.Keys.DefaultAlg)
	pol, _ := policy.Compile(cfg.Policy) // validate checked it
	metrics := server.NewMetrics()
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
		OmitAuditHead: cfg.Revocations.AuditHead != nil && !*cfg.Revocations.AuditHead,
		AuditBatch:    cfg.Audit.BatchSize,

		DisableOnRevoke:    cfg.Keys.OnRevoke == "disable",
		Policy:             pol,
		BackendConcurrency: cfg.Limits.BackendConcurrency,
		Metrics:            metrics,
		// pkcs11 needs no entry: its registered backend enforces
		// pkcs11.pin_source_dirs on every open.
		ImportBackends: map[string]backends.Backend{file.Scheme: fileKeys},
	}, st, log)
	if _, err := auth.Bootstrap(ctx); err != nil {
		return fmt.Errorf("first key: %w", err)
	}
	// Every key that may still sign or be disabled needs its backend: a
	// missing section would otherwise surface only when signing fails.
	if err := auth.CheckBackends(ctx); err != nil {
		return err
	}
	authn, err := authenticator(cfg.Auth)
	if err != nil {
		return err
	}

	var reloader *tlsreload.Reloader
	if cfg.TLS.enabled() {
		reloader, err = tlsreload.New(tlsreload.Config{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile,
			ClientCAFile: cfg.TLS.ClientCAFile, Interval: cfg.TLS.ReloadInterval, Logger: log})
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		metrics.Register(tlsCollector(reloader))
	}
	// Background work stops before the authority closes the audit log and
	// the backends it uses.
	bg, stopBG := context.WithCancel(ctx)
	var bgDone sync.WaitGroup
	defer func() { stopBG(); bgDone.Wait() }()
	if reloader != nil {
		bgDone.Go(func() { reloader.Watch(bg) })
	}
	// SIGHUP is always caught: without TLS there is nothing to reload, but
	// Go's default would end the process without draining it.
	bgDone.Go(func() { reloadOnHUP(bg, reloader, log) })

	gl, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("gRPC listener: %w", err)
	}
	hl, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		gl.Close()
		return fmt.Errorf("HTTP listener: %w", err)
	}
	// A name in the config may resolve to a public address: check the
	// addresses actually bound against the exposure rule again.
	for _, l := range []net.Listener{gl, hl} {
		if ap, ok := l.Addr().(*net.TCPAddr); (!ok || !ap.IP.IsLoopback()) && (reloader == nil || !authn.Enabled()) {
			gl.Close()
			hl.Close()
			return fmt.Errorf("%s is not a loopback address: listening beyond this machine requires TLS (tls.cert_file, tls.key_file) and authentication (auth.tokens or auth.clients)", l.Addr())
		}
	}
	// Excess connections are closed as soon as accepted, before any TLS
	// handshake; each listener has limits of its own, so a flood of one
	// cannot starve the other.
	climits := connLimits(cfg.Limits, nofile, log)
	gl = server.LimitListener(gl, "grpc", climits, metrics, log)
	hl = server.LimitListener(hl, "http", climits, metrics, log)
	log.Info("connection limits", "max_connections", climits.Max, "max_connections_per_ip", climits.MaxPerIP,
		"max_streams_per_connection", cfg.Limits.MaxStreamsPerConnection, "max_header_bytes", cfg.Limits.MaxHeaderBytes,
		"handshake_timeout", cfg.Limits.HandshakeTimeout, "idle_timeout", cfg.Limits.IdleTimeout)
	if cfg.Keys.Prepublish < cfg.JWKS.MaxAge {
		log.Warn("keys.prepublish is shorter than jwks.max_age: verifiers holding a cached JWKS may not know a rotated key when it starts signing",
			"prepublish", cfg.Keys.Prepublish, "jwks_max_age", cfg.JWKS.MaxAge)
	}
	gopts := server.GRPCOptions{
		Auth:            authn,
		RateLimit:       ratelimit.New(cfg.Limits.Rate, cfg.Limits.Burst),
		RequestTimeout:  cfg.Limits.RequestTimeout,
		MaxMessageBytes: cfg.Limits.MaxMessageBytes,

		RefusalLogBurst:    cfg.Limits.RefusalLogBurst,
		RefusalLogInterval: cfg.Limits.RefusalLogInterval,
	}
	gopts.MaxConcurrentStreams, gopts.MaxHeaderListBytes, gopts.HandshakeTimeout, gopts.IdleTimeout = grpcLimits(cfg.Limits)
	httpSrv := &http.Server{
		Handler: server.NewHTTPHandler(auth, server.HTTPOptions{Stats: stats, Auth: authn}),
		// ReadHeaderTimeout also bounds the TLS handshake (net/http takes
		// the shortest of the read timeouts for it).
		ReadHeaderTimeout: cfg.Limits.HandshakeTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       cfg.Limits.IdleTimeout,
		// Headers are read before /metrics authenticates anyone.
		MaxHeaderBytes: cfg.Limits.MaxHeaderBytes,
		HTTP2:          &http.HTTP2Config{MaxConcurrentStreams: cfg.Limits.MaxStreamsPerConnection},
		ErrorLog:       server.NewHTTPErrorLog(log, cfg.Limits.RefusalLogBurst, cfg.Limits.RefusalLogInterval),
	}
	scheme := "http"
	if reloader != nil {
		clientAuth := tls.NoClientCert
		if cfg.TLS.ClientCAFile != "" {
			clientAuth = tls.RequireAndVerifyClientCert
			if cfg.TLS.ClientAuth == "optional" {
				clientAuth = tls.VerifyClientCertIfGiven
			}
		}
		gopts.Creds = credentials.NewTLS(reloader.ServerConfig(clientAuth, "h2"))
		// The HTTP listener serves verifiers without certificates; a
		// client certificate, when offered, can identify a scraper.
		httpAuth := tls.NoClientCert
		if cfg.TLS.ClientCAFile != "" {
			httpAuth = tls.VerifyClientCertIfGiven
		}
		httpSrv.TLSConfig = reloader.ServerConfig(httpAuth, "h2", "http/1.1")
		hl = tls.NewListener(hl, httpSrv.TLSConfig)
		scheme = "https"
	}
	gs, hs := server.NewGRPCServer(auth, log, gopts)

	// Readiness: a first canary now, then periodically.
	rctx, rcancel := context.WithTimeout(ctx, cfg.Readiness.Timeout)
	if err := auth.CheckReadiness(rctx); err != nil {
		log.Warn("not ready at start: readiness check failed", "err", err)
	}
	rcancel()
	health := func(err error) {
		st := healthpb.HealthCheckResponse_SERVING
		if err != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		hs.SetServingStatus("", st)
	}
	bgDone.Go(func() { auth.WatchReadiness(bg, cfg.Readiness.Interval, cfg.Readiness.Timeout, health) })

	errc := make(chan error, 2)
	go func() { errc <- gs.Serve(gl) }()
	go func() { errc <- httpSrv.Serve(hl) }()
	health(auth.Ready())

	if !authn.Enabled() {
		log.Warn("no authentication configured: every local caller may sign and manage keys (the embedded default; listening on loopback only)")
	}
	if reloader == nil {
		log.Warn("TLS is off: plaintext on loopback only")
	}
	if pol.Empty() {
		log.Info("no signing policy rules: any caller with the signer role may sign any card (require_https still applies)")
	}
	log.Info("cardsignd ready",
		"grpc", gl.Addr().String(), "http", hl.Addr().String(),
		"jwks", scheme+"://"+hl.Addr().String()+jwks.JWKSPath,
		"tls", reloader != nil, "authentication", authn.Enabled(),
		"data_dir", cfg.DataDir, "database", dbPath, "key_dir", cfg.Keys.Dir, "key_backend", cfg.Keys.Backend,
		"backends", strings.Join(backends.Schemes(), ","))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		log.Error("listener failed; shutting down", "err", serveErr)
	}
	log.Info("shutting down: finishing in-flight signatures and their audit records")
	stopBG()
	bgDone.Wait()
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

// authenticator builds the token and client certificate table; validate has
// checked every entry.
func authenticator(c AuthConfig) (*access.Authenticator, error) {
	var tokens []access.Token
	for _, t := range c.Tokens {
		h, err := access.ParseTokenHash(t.SHA256)
		if err != nil {
			return nil, fmt.Errorf("auth.tokens %s: %w", t.Name, err)
		}
		tokens = append(tokens, access.Token{Name: t.Name, SHA256: h, Roles: roles(t.Roles)})
	}
	var clients []access.Client
	for _, cl := range c.Clients {
		clients = append(clients, access.Client{Pattern: cl.Identity, Roles: roles(cl.Roles)})
	}
	return access.New(tokens, clients), nil
}

func roles(names []string) []access.Role {
	out := make([]access.Role, 0, len(names))
	for _, n := range names {
		if r, err := access.ParseRole(n); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// reloadOnHUP reloads the TLS files at once on SIGHUP, for operators and
// tools (cert-manager hooks) that would rather not wait for the next poll.
func reloadOnHUP(ctx context.Context, r *tlsreload.Reloader, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if r == nil {
				log.Info("SIGHUP: TLS is off; nothing to reload")
				continue
			}
			changed, err := r.Reload()
			if err != nil {
				log.Warn("SIGHUP: TLS reload failed; still serving the previous certificate", "err", err)
				continue
			}
			if !changed { // a change is logged by the reloader itself
				log.Info("SIGHUP: TLS files unchanged", "not_after", r.Leaf().NotAfter)
			}
		}
	}
}

// tlsCollector exports the serving certificate's expiry and reload counts.
func tlsCollector(r *tlsreload.Reloader) prometheus.Collector {
	return tlsMetrics{r: r,
		expiry:   prometheus.NewDesc("cardsign_tls_certificate_expiry_timestamp_seconds", "NotAfter of the serving certificate.", nil, nil),
		reloads:  prometheus.NewDesc("cardsign_tls_reloads_total", "TLS file reloads that changed the served material.", nil, nil),
		failures: prometheus.NewDesc("cardsign_tls_reload_failures_total", "TLS file reloads that failed (the previous material kept serving).", nil, nil),
	}
}

type tlsMetrics struct {
	r                         *tlsreload.Reloader
	expiry, reloads, failures *prometheus.Desc
}

func (m tlsMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.expiry
	ch <- m.reloads
	ch <- m.failures
}

func (m tlsMetrics) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(m.expiry, prometheus.GaugeValue, float64(m.r.Leaf().NotAfter.Unix()))
	ch <- prometheus.MustNewConstMetric(m.reloads, prometheus.CounterValue, float64(m.r.Reloads()))
	ch <- prometheus.MustNewConstMetric(m.failures, prometheus.CounterValue, float64(m.r.Failures()))
}
