package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"

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
	c, err := Inspect(ctx, cfg)
	return c.Schema, err
}

// Contents is what Inspect found in a database.
type Contents struct {
	Schema SchemaState
	// Keys counts the key records (0 in a database without the schema).
	Keys int64
	// KeyRecords are the key records themselves (the keys table is the
	// same in every schema version), for the start's backend check.
	KeyRecords []jwks.KeyRecord
	// Documents holds the bodies of the documents asked for that exist.
	Documents map[string][]byte
}

// Inspect connects as Open does (password file, sslmode) and reads the
// schema version, how many key records there are and the named documents,
// creating, locking and migrating nothing: cardsignd checks with it, before
// Open migrates anything, that it may use the database at all, so a start
// it refuses leaves the database as it was.
func Inspect(ctx context.Context, cfg Config, documents ...string) (Contents, error) {
	where := Redact(cfg.URL)
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return Contents{}, err
	}
	newest, err := newestMigration(sub)
	if err != nil {
		return Contents{}, err
	}
	poolCfg, err := parseConfig(cfg)
	if err != nil {
		return Contents{}, fmt.Errorf("store: %s: %w", where, err)
	}
	poolCfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return Contents{}, fmt.Errorf("store: %s: %w", where, err)
	}
	defer pool.Close()
	c := Contents{Schema: SchemaState{Newest: newest}, Documents: map[string][]byte{}}
	// Tables are looked for by name, not by schema version: each appeared
	// in some migration, and a database part-way there still answers.
	var version, keys, docs bool
	err = pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass('keys') IS NOT NULL, to_regclass('documents') IS NOT NULL`, versionTable).
		Scan(&version, &keys, &docs)
	if err != nil {
		return Contents{}, fmt.Errorf("store: cannot reach PostgreSQL at %s (is the server running, and are the URL, sslmode and password right?): %w",
			where, classify(ctx, err))
	}
	if version {
		err = pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM `+pgx.Identifier{versionTable}.Sanitize()).Scan(&c.Schema.Current)
		if err != nil {
			return Contents{}, fmt.Errorf("store: %s: schema version: %w", where, classify(ctx, err))
		}
	}
	if keys {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM keys`).Scan(&c.Keys); err != nil {
			return Contents{}, fmt.Errorf("store: %s: key records: %w", where, classify(ctx, err))
		}
		if c.KeyRecords, err = listKeys(ctx, pool); err != nil {
			return Contents{}, fmt.Errorf("store: %s: key records: %w", where, classify(ctx, err))
		}
	}
	for _, name := range documents {
		if !docs {
			break
		}
		var body []byte
		err := pool.QueryRow(ctx, `SELECT body FROM documents WHERE name = $1`, name).Scan(&body)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return Contents{}, fmt.Errorf("store: %s: document %q: %w", where, name, classify(ctx, err))
		default:
			c.Documents[name] = body
		}
	}
	return c, nil
}

// InspectLease connects as Inspect does and reads the lease name and the
// database clock (now(), the clock leases are on), creating, locking and
// migrating nothing. A database without the leases table (no schema yet)
// has no lease: found is false.
func InspectLease(ctx context.Context, cfg Config, name string) (l store.Lease, found bool, now time.Time, err error) {
	where := Redact(cfg.URL)
	poolCfg, err := parseConfig(cfg)
	if err != nil {
		return store.Lease{}, false, time.Time{}, fmt.Errorf("store: %s: %w", where, err)
	}
	poolCfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return store.Lease{}, false, time.Time{}, fmt.Errorf("store: %s: %w", where, err)
	}
	defer pool.Close()
	var leases bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('leases') IS NOT NULL, clock_timestamp()`).Scan(&leases, &now); err != nil {
		return store.Lease{}, false, time.Time{}, fmt.Errorf("store: cannot reach PostgreSQL at %s: %w", where, classify(ctx, err))
	}
	if !leases {
		return store.Lease{}, false, now, nil
	}
	l = store.Lease{Name: name}
	err = pool.QueryRow(ctx, `SELECT holder, epoch, expires_at, clock_timestamp() FROM leases WHERE name = $1`, name).Scan(&l.Holder, &l.Epoch, &l.Expires, &now)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Lease{}, false, now, nil
	case err != nil:
		return store.Lease{}, false, time.Time{}, fmt.Errorf("store: %s: lease %q: %w", where, name, classify(ctx, err))
	}
	l.Expires = l.Expires.UTC()
	return l, true, now.UTC(), nil
}
