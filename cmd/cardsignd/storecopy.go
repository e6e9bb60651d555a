package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/postgres"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/store/storecopy"
)

// topUsage is cardsignd's usage, listing its commands.
const topUsage = `Usage: cardsignd [flags]
       cardsignd store copy --from PATH --to URL [--password-file FILE] [--allow-non-empty]
       cardsignd --version
       cardsignd help

With no flags, keeps everything in ./cardsignd-data, creates and activates an ES256 key on first start,
and serves gRPC on 127.0.0.1:7700 and HTTP on 127.0.0.1:7701.

Commands:
  store copy   copy the embedded SQLite database (keys, audit log, revocation document) to an empty
               PostgreSQL database and verify the copy: the way up from the embedded default
  help         this text
`

// runCommand runs a command (an argument that is not a flag comes first).
func runCommand(args []string, stdout, stderr io.Writer) int {
	switch args[0] {
	case "help":
		fmt.Fprint(stdout, topUsage)
		fmt.Fprintln(stdout, "\nRun 'cardsignd -h' for the daemon's flags and 'cardsignd store copy -h' for the copy's.")
		return 0
	case "store":
		if len(args) < 2 || args[1] != "copy" {
			fmt.Fprintf(stderr, "cardsignd store: want a subcommand: copy\n\n%s", topUsage)
			return 2
		}
		return runStoreCopy(args[2:], stderr)
	}
	fmt.Fprintf(stderr, "cardsignd: unknown command %q\n\n%s", args[0], topUsage)
	return 2
}

const storeCopyUsage = `Usage: cardsignd store copy --from PATH --to URL [--password-file FILE] [--allow-non-empty] [--batch N]

Copies the embedded SQLite database to a PostgreSQL database: every key record as it is, the whole
audit log in order (its hashes come out identical), and the signed revocation document. Then it
verifies the copy: the destination's audit chain, its head against the source's, and the key records.

Stop cardsignd before copying: records it writes during the copy are not copied (the final head
comparison says so). The destination must be empty; --allow-non-empty resumes an interrupted copy
(the destination's keys and audit log must be a part of the source's). The destination's schema is
migrated first.

Example:
  cardsignd store copy --from /var/lib/cardsignd/cardsign.db \
      --to 'postgres://cardsign@db.example.com/cardsign?sslmode=verify-full' \
      --password-file /etc/cardsignd/db-password

Flags:
`

// storeCopyFlags registers the flags of cardsignd store copy on fs; the
// CLI reference is generated from them.
func storeCopyFlags(fs *flag.FlagSet) (from, to, passwordFile *string, allowNonEmpty *bool, batch *int) {
	from = fs.String("from", "", "the SQLite database to copy: its file (cardsign.db) or the data directory holding it")
	to = fs.String("to", "", "the PostgreSQL database to copy to: a postgres:// URL (a password in it shows in ps: prefer --password-file or PGPASSFILE)")
	passwordFile = fs.String("password-file", "", "file holding the destination's password (mode 0600), as store.password_file")
	allowNonEmpty = fs.Bool("allow-non-empty", false, "resume an interrupted copy: the destination's keys and audit log must be a part of the source's")
	batch = fs.Int("batch", storecopy.DefaultBatch, "audit records per transaction")
	return from, to, passwordFile, allowNonEmpty, batch
}

// runStoreCopy is `cardsignd store copy`.
func runStoreCopy(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("cardsignd store copy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from, to, passwordFile, allowNonEmpty, batch := storeCopyFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, storeCopyUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cardsignd store copy: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := checkCopyArgs(*from, *to, *batch); err != nil {
		fmt.Fprintf(stderr, "cardsignd store copy: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	src, dst, srcPath, err := openCopyStores(ctx, *from, *to, *passwordFile, log)
	if err != nil {
		fmt.Fprintf(stderr, "cardsignd store copy: %v\n", err)
		return 1
	}
	defer src.Close()
	defer dst.Close()
	opts := storecopy.Options{AllowNonEmpty: *allowNonEmpty, Batch: *batch, SourceName: srcPath, DestName: postgres.Redact(*to), Out: stderr}
	if _, err := storecopy.Copy(ctx, src, dst, opts); err != nil {
		fmt.Fprintf(stderr, "cardsignd store copy: %v\n", err)
		return 1
	}
	return 0
}

// checkCopyArgs refuses what store copy does not do before anything is
// opened: it copies SQLite to PostgreSQL, the way up from the embedded
// default, and nothing else.
func checkCopyArgs(from, to string, batch int) error {
	switch {
	case from == "" || to == "":
		return errors.New("--from (the SQLite database) and --to (a postgres:// URL) are both required")
	case postgres.IsURL(from):
		return errors.New("--from is a PostgreSQL URL: store copy copies the embedded SQLite database (its file or data directory) to PostgreSQL, nothing else")
	case !postgres.IsURL(to):
		return errors.New("--to must be a postgres:// or postgresql:// URL: store copy copies the embedded SQLite database to PostgreSQL, nothing else")
	case batch < 1 || batch > 10000:
		return fmt.Errorf("--batch %d must be between 1 and 10000", batch)
	}
	return nil
}

// openCopyStores opens the source (an existing SQLite file: opening a
// missing one would create an empty database) and the destination (migrated
// to this binary's schema).
func openCopyStores(ctx context.Context, from, to, passwordFile string, log *slog.Logger) (src, dst store.Store, srcPath string, err error) {
	srcPath = from
	fi, err := os.Stat(srcPath)
	if err == nil && fi.IsDir() {
		srcPath = filepath.Join(srcPath, sqliteFile)
		fi, err = os.Stat(srcPath)
	}
	switch {
	case err != nil:
		return nil, nil, "", fmt.Errorf("--from: %w", err)
	case !fi.Mode().IsRegular():
		return nil, nil, "", fmt.Errorf("--from: %s is not a file", srcPath)
	}
	lite, err := sqlite.Open(ctx, srcPath)
	if err != nil {
		return nil, nil, "", fmt.Errorf("source: %w", err)
	}
	pg, err := postgres.Open(ctx, postgres.Config{URL: to, PasswordFile: passwordFile, MaxConns: 4, Log: log})
	if err != nil {
		lite.Close()
		return nil, nil, "", fmt.Errorf("destination: %w", err)
	}
	return lite, pg, srcPath, nil
}
