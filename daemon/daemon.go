// Package daemon runs cardsignd: from a validated daemonconfig.Config to a
// serving authority and back. It checks before it writes (the start-up
// checks --check-config runs too), opens the store and the key backends,
// builds the authority, its listeners and servers, serves until the context
// ends, and shuts down in order. Package main (cmd/cardsignd) parses flags
// and calls Serve.
package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
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

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/buildinfo"
	"github.com/cardsign/cardsign/internal/daemonconfig"
	"github.com/cardsign/cardsign/internal/sdnotify"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/ratelimit"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/server/grpcapi"
	"github.com/cardsign/cardsign/server/httpapi"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/postgres"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/store/storecopy"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/tlsreload"
	"github.com/cardsign/cardsign/transparency"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Serve runs the daemon until ctx ends or a listener fails. Each step is a
// function of its own; the order matters. Every check that can refuse the
// start runs before anything is written (a refused start leaves the data
// directory, the database and the key directory as they were): the
// checks --check-config runs too (startChecks), the state directories'
// modes, the backends built, the TLS material and callers loaded, both
// listeners bound (a port clash), the database looked at without
// migrating it (checkStore: every key's backend), and the log keys
// compared with the other replicas' (precheckLogKeys, read-only), and the
// replica name looked up (precheckReplica, read-only). Only then is the
// store opened (made or migrated); the checks that need it opened (the
// replica name's claim, a write, for processes starting at once; each key URI against its backend's
// settings; the log keys again, for replicas starting at once) run before
// the first write of the daemon's own: the log key and the first signing
// key. Background work is stopped before the
// authority closes the audit log.
func Serve(ctx context.Context, cfg daemonconfig.Config, log *slog.Logger) error {
	nofile := fileLimit(log)
	if err := checkBeforeWrites(ctx, cfg, log); err != nil {
		return err
	}
	reg, stats, err := openBackends(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer reg.Close()
	metrics := server.NewMetrics()
	authn, err := cfg.Auth.Authenticator(ctx, log)
	if err != nil {
		return err
	}
	reloader, err := openTLS(cfg.TLS, metrics, log)
	if err != nil {
		return err
	}
	gl, hl, err := listen(cfg, reloader != nil, authn.Enabled(), nofile, metrics, log)
	if err != nil {
		return err
	}
	// Serve closes them too; these cover a start refused before it.
	defer gl.Close()
	defer hl.Close()
	tlog, err := openLog(ctx, cfg, reg, log)
	if err != nil {
		return err
	}
	if err := precheckLogKeys(ctx, cfg, tlog.Signer); err != nil {
		return err
	}
	if err := precheckReplica(ctx, cfg, log); err != nil {
		return err
	}
	st, database, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, _, err := transparency.CompareKeys(ctx, sharedLogKeys(st), tlog.Signer, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	auth, pol, err := openAuthority(ctx, cfg, st, reg, tlog, metrics, log)
	if err != nil {
		return err
	}
	go prefetchIDTokenKeys(ctx, authn, log)
	sd := sdnotify.FromEnv()
	bg := startBackground(ctx, auth, reloader, sd, log)
	defer bg.stop()
	cfg.WarnPrepublish(log)
	httpSrv := newHTTPServer(cfg.Limits, auth, server.HTTPOptions{Stats: stats, Auth: authn}, log)
	build := Build()
	gs, hs := newGRPCServer(cfg, auth, authn, reloader, build, log)
	hl, scheme := httpTLS(httpSrv, hl, cfg.TLS, reloader)
	setHealth := startReadiness(ctx, bg, auth, hs, cfg.Readiness, log)

	errc := make(chan error, 2)
	go func() { errc <- gs.Serve(gl) }()
	go func() { errc <- httpSrv.Serve(hl) }()
	setHealth(auth.Ready())

	warnOpen(authn.Enabled(), reloader != nil, pol.Empty(), log)
	if c := cfg.Catalog; c.Enabled() {
		// Where this listener serves them; the organisation's web server
		// routes https://DOMAIN's paths here (README).
		base := scheme + "://" + hl.Addr().String()
		log.Info("AI Catalog on", "did", aicatalog.DID(c.Domain), "catalog", base+aicatalog.WellKnownPath,
			"did_document", base+aicatalog.DIDPath, "public_url", "https://"+c.Domain+aicatalog.WellKnownPath)
	}
	log.Info("cardsignd ready",
		"grpc", gl.Addr().String(), "http", hl.Addr().String(),
		"jwks", scheme+"://"+hl.Addr().String()+jwks.JWKSPath,
		"tls", reloader != nil, "authentication", authn.Enabled(),
		"data_dir", cfg.DataDir, "database", database, "key_dir", cfg.Keys.Dir, "key_backend", cfg.Keys.Backend,
		"backends", strings.Join(reg.Schemes(), ","), "replica", auth.Replica(),
		"version", build.Version, "revision", build.ShortRevision(), "go", build.GoVersion)
	sd.Ready(log, fmt.Sprintf("serving gRPC on %s, HTTP on %s", gl.Addr(), hl.Addr()))

	serveErr := waitForStop(ctx, errc, log)
	sd.Stopping(log, "stopping: finishing in-flight signatures and their audit records")
	if err := shutdown(bg, auth, gs, hs, httpSrv, cfg.ShutdownTimeout, log); err != nil {
		return err
	}
	return serveErr
}

// prefetchIDTokenKeys fetches the identity token issuers' keys in the
// background, so the first token need not wait for them.
func prefetchIDTokenKeys(ctx context.Context, authn *access.Authenticator, log *slog.Logger) {
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := authn.PrefetchIDTokenKeys(pctx); err != nil {
		log.Warn("identity token issuers: keys not fetched at start; fetched again at the first token", "err", err)
	}
}

// warnOpen says, once serving, what is left open by choice: no
// authentication, no TLS, no signing policy.
func warnOpen(authOn, tlsOn, noPolicy bool, log *slog.Logger) {
	if !authOn {
		log.Warn("no authentication configured: every local caller may sign and manage keys (the embedded default; listening on loopback only)")
	}
	if !tlsOn {
		log.Warn("TLS is off: plaintext on loopback only")
	}
	if noPolicy {
		log.Info("no signing policy rules: any caller with the signer role may sign any card (require_https still applies)")
	}
}

// checkBeforeWrites runs the checks --check-config runs too (startChecks),
// then judges the existing state directories; openStore makes missing ones
// (mode 0700) after every check.
func checkBeforeWrites(ctx context.Context, cfg daemonconfig.Config, log *slog.Logger) error {
	for _, check := range StartChecks(ctx) {
		if err := check(cfg); err != nil {
			return err
		}
	}
	return cfg.CheckStateDirs(log)
}

// fileLimit raises the open file limit as far as allowed and returns it
// (0: unknown), for the connection limits to be derived from.
func fileLimit(log *slog.Logger) uint64 {
	nofile, hardNofile, err := raiseFileLimit()
	if err != nil {
		log.Warn("could not raise the open file limit; connection limits are derived from the current one", "err", err, "nofile", nofile, "hard", hardNofile)
	} else {
		log.Info("open file limit", "nofile", nofile, "hard", hardNofile)
	}
	return nofile
}

// openStore makes the state directories (checked by serve before) and opens
// the store: the PostgreSQL database of store.url (migrated to this
// binary's schema; checkStore has looked at it first), or else the SQLite
// database in the data directory. database names it for the start-up
// summary: the SQLite file, or the URL without its password.
func openStore(ctx context.Context, cfg daemonconfig.Config, log *slog.Logger) (st store.Store, database string, err error) {
	for _, dir := range []string{cfg.DataDir, cfg.Keys.Dir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", fmt.Errorf("data directory: %w", err)
		}
	}
	if cfg.Store.Postgres() {
		cfg.WarnStore(log)
		database = cfg.Store.Redacted()
		pg, err := postgres.Open(ctx, cfg.Store.PostgresConfig(log)) // the store names the database in its lines
		if err != nil {
			return nil, "", err // names the redacted URL
		}
		return pg, database, nil
	}
	database = filepath.Join(cfg.DataDir, SQLiteFile)
	lite, err := sqlite.OpenWith(ctx, database, sqlite.Options{Log: log})
	if err != nil {
		return nil, "", err
	}
	return lite, database, nil
}

// SQLiteFile is the embedded database's name in the data directory.
const SQLiteFile = "cardsign.db"

// StartChecks are the start-up checks that need what only this binary
// knows (its build, the store's contents read without migrating it): the
// daemon runs them before it writes anything, and --check-config runs them
// after validating the file, so it refuses what the start would refuse.
func StartChecks(ctx context.Context) []func(daemonconfig.Config) error {
	return []func(daemonconfig.Config) error{
		func(c daemonconfig.Config) error { return c.CheckBuild(notBuilt()) },
		func(c daemonconfig.Config) error { return checkStore(ctx, c) },
	}
}

// checkStore looks at the store before the start opens (and so migrates)
// it, reading only: a PostgreSQL database migrated by a newer cardsignd is
// refused, and so is one usableCopy refuses; on either store, a key on
// record that may still sign whose backend this config or build lacks
// (daemonconfig.CheckKeyBackends); with a catalog, no key that can sign it
// (daemonconfig.CheckCatalogKeys). It needs no secrets, so --check-config runs it too.
// SQLite's read-only look refuses a newer schema as its open would.
func checkStore(ctx context.Context, cfg daemonconfig.Config) error {
	if !cfg.Store.Postgres() {
		c, err := sqlite.Inspect(ctx, filepath.Join(cfg.DataDir, SQLiteFile))
		if err != nil {
			return err
		}
		return checkKeys(cfg, c.Keys)
	}
	database := cfg.Store.Redacted()
	c, err := postgres.Inspect(ctx, cfg.Store.PostgresConfig(nil), storecopy.Marker)
	if err != nil {
		return err // names the redacted URL
	}
	if c.Schema.Refused() {
		return fmt.Errorf("store.url: %s: schema %s", database, c.Schema)
	}
	if err := usableCopy(c, cfg.DataDir, database); err != nil {
		return err
	}
	return checkKeys(cfg, c.KeyRecords)
}

// checkKeys is what checkStore asks of the keys on record: every key that
// may still sign has its backend, and a configured catalog has a key that
// can sign it.
func checkKeys(cfg daemonconfig.Config, recs []jwks.KeyRecord) error {
	if err := cfg.CheckKeyBackends(recs, notBuilt()); err != nil {
		return err
	}
	return cfg.CheckCatalogKeys(recs)
}

// precheckReplica refuses a configured replica name another live process
// holds (server.PrecheckReplica), reading the store without opening or
// migrating it; Authority.ClaimReplica after the open stays the claim.
func precheckReplica(ctx context.Context, cfg daemonconfig.Config, log *slog.Logger) error {
	read := func(ctx context.Context, name string) (store.Lease, bool, time.Time, error) {
		return sqlite.InspectLease(ctx, filepath.Join(cfg.DataDir, SQLiteFile), name)
	}
	if cfg.Store.Postgres() {
		read = func(ctx context.Context, name string) (store.Lease, bool, time.Time, error) {
			return postgres.InspectLease(ctx, cfg.Store.PostgresConfig(nil), name)
		}
	}
	return server.PrecheckReplica(ctx, cfg.Replica, read, log)
}

// precheckLogKeys compares this replica's log keys with those the replica
// that started last recorded (transparency.CompareKeys), reading the store without
// opening or migrating it, so a start it refuses leaves the store as it
// was. It needs the log keys opened, so --check-config does not run it.
func precheckLogKeys(ctx context.Context, cfg daemonconfig.Config, s *transparency.Signer) error {
	var doc store.Document
	var found bool
	if cfg.Store.Postgres() {
		c, err := postgres.Inspect(ctx, cfg.Store.PostgresConfig(nil), transparency.KeysDocument)
		if err != nil {
			return err
		}
		var body []byte
		if body, found = c.Documents[transparency.KeysDocument]; found {
			doc = store.Document{Name: transparency.KeysDocument, Body: body}
		}
	} else {
		c, err := sqlite.Inspect(ctx, filepath.Join(cfg.DataDir, SQLiteFile), transparency.KeysDocument)
		if err != nil {
			return err
		}
		doc, found = c.Documents[transparency.KeysDocument]
	}
	if !found {
		return nil
	}
	_, _, err := transparency.CompareKeysRecord(transparency.KeysRecord{Seq: doc.Seq, Body: doc.Body, UpdatedAt: doc.UpdatedAt}, s, slog.New(slog.DiscardHandler))
	return err
}

// usableCopy refuses to start on a PostgreSQL database that `cardsignd
// store copy` is copying into and has not verified (a part-copy lacks the
// revoked keys and the end of the audit log), and on an empty one when the
// data directory still holds the embedded database: store.url was set
// without the copy, and starting would make a new first key and leave the
// keys and audit log on record behind.
func usableCopy(c postgres.Contents, dataDir, database string) error {
	if marker, copying := c.Documents[storecopy.Marker]; copying && string(marker) != storecopy.Complete {
		return fmt.Errorf("a cardsignd store copy into %s has not finished (its copy is %q): run it again with --allow-non-empty "+
			"until it says the copy is verified, then start cardsignd", database, marker)
	}
	lite := filepath.Join(dataDir, SQLiteFile)
	if _, err := os.Stat(lite); err != nil || c.Keys > 0 {
		return nil
	}
	return fmt.Errorf("store.url names an empty database (%s) but the data directory holds the embedded database %s: "+
		"copy it first (cardsignd store copy --from %s --to URL), or, to start afresh on PostgreSQL, move %s out of the data directory",
		database, lite, lite, lite)
}

// openBackends builds the registry of key backends the config enables:
// file keys always; pkcs11, gcpkms and awskms when configured (or chosen for
// new keys). Each is built here, so a broken section stops the start. A
// build without one of them (CGO_ENABLED=0, -tags nopkcs11/nogcpkms/noawskms)
// adds a constructor that says so.
func openBackends(ctx context.Context, cfg daemonconfig.Config, log *slog.Logger) (reg *backends.Registry, stats []server.StatsSource, err error) {
	// The deferred Close holds its own reference: the error returns below
	// set the named result to nil before it runs.
	r := backends.NewRegistry()
	reg = r
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	// Keys on record reopen through the unrestricted file backend: their
	// URIs were vetted when they were recorded (see ImportBackends).
	if err := reg.Add(file.Scheme, file.Constructor, backends.Config{}); err != nil {
		return nil, nil, err
	}
	if cfg.PKCS11.Enabled() {
		if err := addPKCS11(reg, cfg.PKCS11, log); err != nil {
			return nil, nil, err
		}
	}
	if cfg.GCPKMS.Enabled() || cfg.Keys.Backend == "gcpkms" {
		if err := addGCPKMS(reg, cfg.GCPKMS, log); err != nil {
			return nil, nil, err
		}
	}
	if cfg.AWSKMS.Enabled() || cfg.Keys.Backend == "awskms" {
		if err := addAWSKMS(reg, cfg.AWSKMS, log); err != nil {
			return nil, nil, err
		}
	}
	if cfg.AzureKV.Enabled() || cfg.Keys.Backend == "azurekv" {
		if err := addAzureKV(reg, cfg.AzureKV, log); err != nil {
			return nil, nil, err
		}
	}
	if cfg.HashiVault.Enabled() || cfg.Keys.Backend == "hashivault" {
		if err := addHashiVault(reg, cfg.HashiVault, log); err != nil {
			return nil, nil, err
		}
	}
	if err := reg.Build(ctx); err != nil {
		return nil, nil, err
	}
	for _, scheme := range reg.Schemes() {
		b, err := reg.Backend(ctx, scheme)
		if err != nil {
			return nil, nil, err
		}
		if sr, ok := b.(backends.StatsReporter); ok {
			stats = append(stats, kmsStats(scheme, sr))
		}
		log.Info("key backend ready", "backend", scheme)
	}
	return reg, stats, nil
}

// kmsStats is the one adapter from the KMS backends' counters to /metrics.
func kmsStats(scheme string, sr backends.StatsReporter) server.StatsSource {
	return server.StatsSource{Backend: scheme, Read: func() server.BackendStats {
		s := sr.Stats()
		return server.BackendStats{Attempts: s.Attempts, Throttled: s.Throttled, Retries: s.Retries, Failures: s.Failures,
			LatencyCount: s.Latency.Count, LatencyTotal: s.Latency.Total, LatencyMax: s.Latency.Max}
	}}
}

// openAuthority builds the signing authority, checks that every key that
// may still sign has its backend, then writes: the log key made in memory
// (tlog), the log keys this replica signs with, and the first key on a
// fresh store. It returns the compiled policy too, for the start-up summary.
func openAuthority(ctx context.Context, cfg daemonconfig.Config, st store.Store, reg *backends.Registry, tlog *transparency.Keys, metrics *server.Metrics, log *slog.Logger) (*server.Authority, *policy.Policy, error) {
	// Imported file keys must come from the key directory or a configured
	// import directory: an import names a path, and the daemon can read
	// files its callers cannot.
	fileKeys, err := file.New(file.Config{AllowedDirs: append([]string{cfg.Keys.Dir}, cfg.Keys.ImportDirs...)})
	if err != nil {
		return nil, nil, fmt.Errorf("keys.import_dirs: %w", err)
	}
	alg, _ := jose.ParseAlg(cfg.Keys.DefaultAlg)
	pol, _ := policy.Compile(cfg.Policy) // validate checked it
	witnesses, witnessPolicy, witnessWait, err := witnessSettings(cfg.Log)
	if err != nil {
		return nil, nil, err
	}
	evs, err := eventsSettings(cfg)
	if err != nil {
		return nil, nil, err
	}
	auth := server.NewAuthority(server.Config{
		Backends:      reg,
		KeyBackend:    cfg.Keys.Backend,
		KeyDir:        cfg.Keys.Dir,
		DefaultAlg:    alg,
		Prepublish:    cfg.Keys.Prepublish,
		RetireGrace:   cfg.Keys.RetireGrace,
		JKU:           cfg.Signing.JKU,
		Lifetime:      cfg.Signing.Lifetime,
		RefreshAt:     cfg.Signing.RefreshAt,
		Limits:        strictjson.Limits{MaxBytes: cfg.Signing.MaxCardBytes, MaxDepth: cfg.Signing.MaxCardDepth, MaxValues: cfg.Signing.MaxCardValues},
		JWKSMaxAge:    cfg.JWKS.MaxAge,
		RevocationTTL: cfg.Revocations.TTL,
		OmitAuditHead: cfg.Revocations.AuditHead != nil && !*cfg.Revocations.AuditHead,
		AuditBatch:    cfg.Audit.BatchSize,
		RegistryKeep:  cfg.Registry.Keep,

		RegistryMaxAgents:          cfg.Registry.MaxAgents,
		RegistryMaxAgentsPerCaller: cfg.Registry.MaxAgentsPerCaller,
		RegistryResignRate:         cfg.Registry.ResignRate,
		RegistryResignConcurrency:  cfg.Registry.ResignConcurrency,

		DisableOnRevoke:    cfg.Keys.OnRevoke == "disable",
		Policy:             pol,
		BackendConcurrency: cfg.Limits.BackendConcurrency,
		Metrics:            metrics,
		// pkcs11 needs no entry: its registered backend enforces
		// pkcs11.pin_source_dirs on every open.
		ImportBackends: map[string]backends.Backend{file.Scheme: fileKeys},
		Replica:        cfg.Replica,
		ClockSkew:      cfg.ClockSkew,
		Log:            tlog.Signer,
		LogOpenPrivate: cfg.Log.Private == "open",
		Witnesses:      witnesses,
		WitnessPolicy:  witnessPolicy,
		WitnessWait:    witnessWait,
		WitnessTimeout: cfg.Log.WitnessTimeout,
		Catalog:        cfg.Catalog.Settings(),
		Events:         evs,
	}, st, log)
	if cfg.ClockSkew != 0 {
		log.Warn(daemonconfig.ClockSkewEnv+" is set: this process takes its host clock to be off by this much (a test knob)", "clock_skew", cfg.ClockSkew)
	}
	// Every key that may still sign or be disabled needs its backend: a
	// missing section would otherwise surface only when signing fails. It is
	// the last check, before the first writes.
	if err := auth.Admin().CheckBackends(ctx); err != nil {
		return nil, nil, err
	}
	// A replica name a live process holds is refused (waiting out a killed
	// predecessor's lease, up to 15 s) before anything is made: the claim
	// is a lease row that lapses by itself.
	if err := auth.ClaimReplica(ctx); err != nil {
		return nil, nil, err
	}
	if err := writeLogKey(tlog, log); err != nil {
		return nil, nil, err
	}
	if err := transparency.CheckSharedKeys(ctx, sharedLogKeys(st), tlog.Signer, log); err != nil {
		return nil, nil, err
	}
	// Bootstrap makes a key only when the store has none: a replica joining
	// a store with keys never makes one of its own, and one that cannot
	// open a key on record says so instead (readiness fails, and signing is
	// refused naming the key).
	if _, err := auth.Bootstrap(ctx); err != nil {
		return nil, nil, fmt.Errorf("first key: %w", err)
	}
	return auth, pol, nil
}

// openTLS loads the TLS material when TLS is on (nil when off) and exports
// its expiry and reloads as metrics.
func openTLS(c daemonconfig.TLSConfig, metrics *server.Metrics, log *slog.Logger) (*tlsreload.Reloader, error) {
	if !c.Enabled() {
		return nil, nil
	}
	reloader, err := tlsreload.New(tlsreload.Config{CertFile: c.CertFile, KeyFile: c.KeyFile,
		ClientCAFile: c.ClientCAFile, Interval: c.ReloadInterval, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	metrics.Register(reloader.Collector())
	return reloader, nil
}

// background is the daemon's background work (TLS file polling, SIGHUP,
// readiness probes, the cluster duties). It is stopped before the authority
// closes the audit log and the backends it uses.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startBackground starts the cluster duties (the duties lease, the
// revocation document, following other replicas' changes), watching the TLS
// files when TLS is on, and SIGHUP.
func startBackground(ctx context.Context, auth *server.Authority, reloader *tlsreload.Reloader, sd *sdnotify.Notifier, log *slog.Logger) *background {
	bg := &background{}
	bg.ctx, bg.cancel = context.WithCancel(ctx)
	// Stopped with the rest, before the authority closes: it releases the
	// duties lease on its way out, so another replica takes over at once.
	bg.wg.Go(func() { auth.RunDuties(bg.ctx) })
	if reloader != nil {
		bg.wg.Go(func() { reloader.Watch(bg.ctx) })
	}
	// SIGHUP is always caught: without TLS there is nothing to reload, but
	// Go's default would end the process without draining it. Caught here,
	// before the start is announced, not in the goroutine: a SIGHUP sent
	// right after READY=1 must not find Go's default still in place.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	bg.wg.Go(func() { reloadOnHUP(bg.ctx, hup, reloader, sd, log) })
	return bg
}

// stop ends the background work and waits for it; calling it again is a
// no-op.
func (b *background) stop() {
	b.cancel()
	b.wg.Wait()
}

// listen binds both listeners, checks the addresses actually bound against
// the exposure rule, and puts each behind its connection limits.
func listen(cfg daemonconfig.Config, tlsOn, authOn bool, nofile uint64, metrics *server.Metrics, log *slog.Logger) (gl, hl net.Listener, err error) {
	gl, err = net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("gRPC listener: %w", err)
	}
	hl, err = net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		gl.Close()
		return nil, nil, fmt.Errorf("HTTP listener: %w", err)
	}
	for _, l := range []net.Listener{gl, hl} {
		if err := daemonconfig.CheckBound(l.Addr(), tlsOn, authOn); err != nil {
			gl.Close()
			hl.Close()
			return nil, nil, err
		}
	}
	// Excess connections are closed as soon as accepted, before any TLS
	// handshake; each listener has limits of its own, so a flood of one
	// cannot starve the other.
	rl := daemonconfig.ConnLimits(cfg.Limits, nofile, log)
	climits := httpapi.ConnLimits{Max: rl.MaxConnections, MaxPerIP: rl.MaxConnectionsPerIP, RefusalLogBurst: rl.RefusalLogBurst, RefusalLogInterval: rl.RefusalLogInterval}
	gl = httpapi.LimitListener(gl, "grpc", climits, metrics, log)
	hl = httpapi.LimitListener(hl, "http", climits, metrics, log)
	log.Info("connection limits", "max_connections", climits.Max, "max_connections_per_ip", climits.MaxPerIP,
		"max_streams_per_connection", cfg.Limits.MaxStreamsPerConnection, "max_header_bytes", cfg.Limits.MaxHeaderBytes,
		"handshake_timeout", cfg.Limits.HandshakeTimeout, "idle_timeout", cfg.Limits.IdleTimeout,
		"max_unauthenticated_streams", cfg.Limits.MaxUnauthenticatedStreams, "max_unauthenticated_streams_per_ip", cfg.Limits.MaxUnauthenticatedStreamsPerIP)
	return gl, hl, nil
}

// newHTTPServer serves the JWKS, the revocation document, health and
// metrics within the configured limits; TLS is added by the caller.
func newHTTPServer(l daemonconfig.LimitsConfig, auth *server.Authority, opts server.HTTPOptions, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler: server.NewHTTPHandler(auth, opts),
		// ReadHeaderTimeout also bounds the TLS handshake (net/http takes
		// the shortest of the read timeouts for it).
		ReadHeaderTimeout: l.HandshakeTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       l.IdleTimeout,
		// Headers are read before /metrics authenticates anyone.
		MaxHeaderBytes: l.MaxHeaderBytes,
		HTTP2:          &http.HTTP2Config{MaxConcurrentStreams: l.MaxStreamsPerConnection},
		ErrorLog:       httpapi.NewErrorLog(log, l.RefusalLogBurst, l.RefusalLogInterval),
	}
}

// newGRPCServer builds the gRPC services with their callers, rate and
// connection limits, and TLS when it is on.
func newGRPCServer(cfg daemonconfig.Config, auth *server.Authority, authn *access.Authenticator, reloader *tlsreload.Reloader, build buildinfo.Info,
	log *slog.Logger) (*grpc.Server, *health.Server) {
	l := cfg.Limits
	gopts := grpcapi.Options{
		Auth:            authn,
		RateLimit:       ratelimit.New(l.Rate, l.Burst),
		RequestTimeout:  l.RequestTimeout,
		MaxMessageBytes: l.MaxMessageBytes,

		MaxConcurrentStreams: uint32(l.MaxStreamsPerConnection),
		MaxHeaderListBytes:   uint32(l.MaxHeaderBytes),
		HandshakeTimeout:     l.HandshakeTimeout,
		IdleTimeout:          l.IdleTimeout,
		RefusalLogBurst:      l.RefusalLogBurst,
		RefusalLogInterval:   l.RefusalLogInterval,

		MaxUnauthenticatedStreams:      l.MaxUnauthenticatedStreams,
		MaxUnauthenticatedStreamsPerIP: l.MaxUnauthenticatedStreamsPerIP,

		Build: build,
	}
	if reloader != nil {
		grpcAuth, _ := cfg.TLS.ClientCertModes()
		gopts.Creds = credentials.NewTLS(reloader.ServerConfig(grpcAuth, "h2"))
	}
	return grpcapi.NewServer(auth, log, gopts)
}

// httpTLS puts TLS on the HTTP listener when it is on and returns the
// listener with the scheme of the JWKS address.
func httpTLS(srv *http.Server, l net.Listener, c daemonconfig.TLSConfig, reloader *tlsreload.Reloader) (net.Listener, string) {
	if reloader == nil {
		return l, "http"
	}
	_, httpAuth := c.ClientCertModes()
	srv.TLSConfig = reloader.ServerConfig(httpAuth, "h2", "http/1.1")
	return tls.NewListener(l, srv.TLSConfig), "https"
}

// startReadiness runs a first readiness canary now and then periodically,
// reporting to the gRPC health service; it returns the function that
// sets the health status.
func startReadiness(ctx context.Context, bg *background, auth *server.Authority, hs *health.Server, c daemonconfig.ReadinessConfig, log *slog.Logger) func(error) {
	rctx, rcancel := context.WithTimeout(ctx, c.Timeout)
	if err := auth.CheckReadiness(rctx); err != nil {
		log.Warn("not ready at start: readiness check failed", "err", err)
	}
	rcancel()
	setHealth := func(err error) {
		st := healthpb.HealthCheckResponse_SERVING
		if err != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		hs.SetServingStatus("", st)
	}
	bg.wg.Go(func() { auth.WatchReadiness(bg.ctx, c.Interval, c.Timeout, setHealth) })
	return setHealth
}

// waitForStop returns when ctx ends (SIGTERM, SIGINT) or a listener fails,
// with the listener's error.
func waitForStop(ctx context.Context, errc <-chan error, log *slog.Logger) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		log.Error("listener failed; shutting down", "err", err)
		return err
	}
}

// shutdown stops in order: background work, new signatures (in-flight ones
// finish with their audit records), gRPC (forced after timeout), HTTP,
// then the audit log.
func shutdown(bg *background, auth *server.Authority, gs *grpc.Server, hs *health.Server, httpSrv *http.Server, timeout time.Duration, log *slog.Logger) error {
	log.Info("shutting down: finishing in-flight signatures and their audit records")
	bg.stop()
	auth.Drain()
	hs.Shutdown()
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
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
	return nil
}

// reloadOnHUP reloads the TLS files at once on SIGHUP, for operators and
// tools (cert-manager hooks) that would rather not wait for the next poll.
// hup is already subscribed to SIGHUP; it is unsubscribed on return.
func reloadOnHUP(ctx context.Context, hup chan os.Signal, r *tlsreload.Reloader, sd *sdnotify.Notifier, log *slog.Logger) {
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			sd.Reloading(log)
			reloadTLS(r, log)
			sd.Reloaded(log)
		}
	}
}

// reloadTLS is one SIGHUP's reload.
func reloadTLS(r *tlsreload.Reloader, log *slog.Logger) {
	if r == nil {
		log.Info("SIGHUP: TLS is off; nothing to reload")
		return
	}
	changed, err := r.Reload()
	if err != nil {
		log.Warn("SIGHUP: TLS reload failed; still serving the previous certificate", "err", err)
		return
	}
	if !changed { // a change is logged by the reloader itself
		log.Info("SIGHUP: TLS files unchanged", "not_after", r.Leaf().NotAfter)
	}
}
