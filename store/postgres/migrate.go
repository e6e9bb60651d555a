package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// migrationFiles holds the schema, one goose SQL file per version:
// NNNNN_name.sql, numbered from 1 without gaps. A released migration is
// never edited; a schema change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// Goose's tables, named for cardsign so that a database shared with another
// application that uses goose keeps the two histories apart.
const (
	versionTable = "cardsign_schema_version"
	lockTable    = "cardsign_schema_lock"
)

// Migration lock timing. The lock is a row in lockTable with a lease that
// goose renews while it migrates: a replica that dies mid-migration holds
// it for at most lockLease. Waiting replicas poll every lockPoll, for
// lockWait in all: long enough for any migration of ours.
const (
	lockLease = 30 * time.Second
	lockPoll  = 250 * time.Millisecond
	lockWait  = 5 * time.Minute
)

// migrate applies the embedded migrations the database lacks, with pressly/
// goose's Provider under its PostgreSQL *table* locker: whichever replica
// gets the lock row applies them, each migration in its own transaction with
// its version row, and the others wait, then find nothing left to do. Not
// goose's session locker, which takes a session-level advisory lock, lost
// behind PgBouncer in transaction mode.
//
// Before anything is created or applied, a database whose schema version is
// newer than this binary's newest migration is refused: a newer cardsignd
// migrated it, and writing to it with older code could break invariants the
// newer schema relies on.
func (s *core) migrate(ctx context.Context, poolCfg *pgxpool.Config) error {
	return migrate(ctx, poolCfg, migrationFiles, s.log)
}

func migrate(ctx context.Context, poolCfg *pgxpool.Config, fsys fs.FS, log *slog.Logger) error {
	sub, err := fs.Sub(fsys, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	newest, err := newestMigration(sub)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// A pool of its own: goose holds one connection for the migrations and
	// uses others for the lock and its heartbeat, which with a store pool of
	// MaxConns 1 would deadlock. It is closed when migrate returns.
	cfg := poolCfg.Copy()
	cfg.MaxConns, cfg.MinConns = 3, 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer pool.Close()
	if err := checkVersion(ctx, pool, newest); err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	locker, err := lock.NewPostgresTableLocker(
		lock.WithTableName(lockTable),
		lock.WithTableLeaseDuration(lockLease),
		lock.WithTableLockTimeout(lockPoll, uint64(lockWait/lockPoll)),
		// Giving the lock back is retried briefly: if it fails (the server
		// went away), the lease frees it within lockLease anyway.
		lock.WithTableUnlockTimeout(lockPoll, 20),
		lock.WithTableLogger(log),
	)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub,
		goose.WithLocker(locker),
		goose.WithTableName(versionTable),
		goose.WithDisableGlobalRegistry(true), // no process-wide Go migrations
	)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", classify(ctx, err))
	}
	for _, r := range results {
		log.Info("applied schema migration", "version", r.Source.Version, "file", path.Base(r.Source.Path), "took", r.Duration)
	}
	// A newer cardsignd may have migrated between the check above and
	// goose's lock; goose then applies nothing, and this says why.
	return checkVersion(ctx, pool, newest)
}

// newestMigration returns the highest version among the migration files.
func newestMigration(fsys fs.FS) (int64, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return 0, err
	}
	var newest int64
	for _, n := range names {
		v, err := goose.NumericComponent(n)
		if err != nil {
			return 0, fmt.Errorf("migration %s: %w", n, err)
		}
		newest = max(newest, v)
	}
	if newest == 0 {
		return 0, errors.New("no migrations embedded")
	}
	return newest, nil
}

// checkVersion refuses a database whose recorded schema version is newer
// than newest. A database without the version table is new.
func checkVersion(ctx context.Context, pool *pgxpool.Pool, newest int64) error {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, versionTable).Scan(&exists); err != nil {
		return fmt.Errorf("migrate: schema version: %w", classify(ctx, err))
	}
	if !exists {
		return nil
	}
	var current int64
	err := pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM `+pgx.Identifier{versionTable}.Sanitize()).Scan(&current)
	if err != nil {
		return fmt.Errorf("migrate: schema version: %w", classify(ctx, err))
	}
	if current > newest {
		return fmt.Errorf("database schema version %d is newer than this cardsign supports (%d): upgrade cardsignd", current, newest)
	}
	return nil
}
