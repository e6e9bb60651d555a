package postgres

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaState is a database's schema version against this binary's.
type SchemaState struct {
	Current int64 // 0: no cardsign schema yet (an empty database)
	Newest  int64 // the newest migration this binary holds
}

func (s SchemaState) String() string {
	switch {
	case s.Current == s.Newest:
		return fmt.Sprintf("up to date (version %d)", s.Current)
	case s.Current == 0:
		return fmt.Sprintf("empty: cardsignd creates the schema (version %d) at start", s.Newest)
	case s.Current < s.Newest:
		return fmt.Sprintf("version %d: cardsignd migrates it to %d at start", s.Current, s.Newest)
	}
	return fmt.Sprintf("version %d is newer than this cardsignd supports (%d): refused; upgrade cardsignd", s.Current, s.Newest)
}

// Refused reports whether Open would refuse the database.
func (s SchemaState) Refused() bool { return s.Current > s.Newest }

// CheckSchema connects as Open does (password file, sslmode) and reports the
// schema version, creating, locking and migrating nothing: for
// cardsignd --check-config.
func CheckSchema(ctx context.Context, cfg Config) (SchemaState, error) {
	where := Redact(cfg.URL)
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return SchemaState{}, err
	}
	newest, err := newestMigration(sub)
	if err != nil {
		return SchemaState{}, err
	}
	poolCfg, err := parseConfig(cfg)
	if err != nil {
		return SchemaState{}, fmt.Errorf("store: %s: %w", where, err)
	}
	poolCfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return SchemaState{}, fmt.Errorf("store: %s: %w", where, err)
	}
	defer pool.Close()
	st := SchemaState{Newest: newest}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, versionTable).Scan(&exists); err != nil {
		return SchemaState{}, fmt.Errorf("store: cannot reach PostgreSQL at %s (is the server running, and are the URL, sslmode and password right?): %w",
			where, classify(ctx, err))
	}
	if !exists {
		return st, nil
	}
	err = pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM `+pgx.Identifier{versionTable}.Sanitize()).Scan(&st.Current)
	if err != nil {
		return SchemaState{}, fmt.Errorf("store: %s: schema version: %w", where, classify(ctx, err))
	}
	return st, nil
}
