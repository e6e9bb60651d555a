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
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/cardsign/cardsign/buildinfo"
	cardsignd "github.com/cardsign/cardsign/daemon"
	"github.com/cardsign/cardsign/internal/daemonconfig"
)

func main() {
	tuneGC()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// defaultGCPercent is the garbage collector's target unless GOGC is set. The
// live heap of a signing daemon is small and nearly all garbage is short-lived
// request data, so Go's default (100) collects very often: under load that
// cost ≈ 12% of the CPU per signed card, for a few tens of MiB of memory
// saved (README, Benchmarks).
const defaultGCPercent = 400

// tuneGC applies defaultGCPercent when the operator did not choose (GOGC in
// the environment, "off" included, always wins; so does GOMEMLIMIT).
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return runCommand(args, stdout, stderr)
	}
	fs := flag.NewFlagSet("cardsignd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := defineFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, topUsage)
		fmt.Fprintf(stderr, "\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *f.version {
		printVersion(stdout)
		return 0
	}
	if *f.checkConfig != "" {
		// Which build checks, first: another version may answer otherwise
		// (a field it does not know yet).
		fmt.Fprintf(stderr, "cardsignd %s\n", buildinfo.Read())
		// The start's own checks too (except binding the listeners: the
		// check runs beside a daemon already serving on them, before a
		// restart), bounded like the connection check.
		ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
		defer cancel()
		if err := daemonconfig.Check(*f.checkConfig, stderr, cardsignd.StartChecks(ctx)...); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintf(stderr, "%s: ok\n", *f.checkConfig)
		return 0
	}
	cfg, err := daemonconfig.Load(*f.configPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	over := daemonconfig.Overrides{DataDir: *f.dataDir, GRPCAddr: *f.grpcAddr, HTTPAddr: *f.httpAddr, LogLevel: *f.logLevel}
	if *f.prepublish != "" {
		d, err := time.ParseDuration(*f.prepublish)
		if err != nil {
			fmt.Fprintf(stderr, "--prepublish: %v\n", err)
			return 2
		}
		over.Prepublish = &d
	}
	cfg.Apply(over)
	if err := cfg.ApplyEnv(os.Getenv); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log := cfg.Logger(stderr)
	stopProfile, err := startCPUProfile(os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer stopProfile()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := cardsignd.Serve(ctx, cfg, log); err != nil {
		log.Error("cardsignd stopped", "err", err)
		return 1
	}
	return 0
}

// printVersion prints the build, as --version does: the one-line version,
// then the key backends this binary has (a build tag or cgo can leave some
// out, which decides whether a config's key URIs can open).
func printVersion(w io.Writer) {
	b := cardsignd.Build()
	fmt.Fprintf(w, "cardsignd %s\nbackends: %s\n", b, strings.Join(b.Backends, ", "))
}

// checkTimeout bounds the start-up checks of --check-config that reach the
// database.
const checkTimeout = 10 * time.Second

// pinEnv is the PIN's environment variable (the tests set it).
const pinEnv = daemonconfig.PINEnv

// sqliteFile is the embedded database's name in the data directory.
const sqliteFile = cardsignd.SQLiteFile
