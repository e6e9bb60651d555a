package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// Contents is what Inspect reads of an existing database.
type Contents struct {
	// Exists: the file is there (false: nothing else is set).
	Exists bool
	// Keys are the key records (the keys table is the same in every
	// schema version).
	Keys []jwks.KeyRecord
	// Documents holds the named documents that exist.
	Documents map[string]store.Document
}

// Inspect reads the key records and the named documents of the database at
// path, if it exists, opening it read-only: it creates, configures and
// migrates nothing, so cardsignd can check what the start needs before
// Open migrates the file, and a start it refuses leaves the file as it
// was. A database made by a newer cardsignd is refused as Open refuses it.
func Inspect(ctx context.Context, path string, documents ...string) (Contents, error) {
	db, exists, err := openInspect(path)
	if err != nil || !exists {
		return Contents{}, err
	}
	defer db.Close()
	c, err := inspect(ctx, db, documents)
	if err != nil {
		return Contents{}, fmt.Errorf("store: inspect %s: %w", path, err)
	}
	return c, nil
}

// openInspect opens the database at path read-only, if it exists.
func openInspect(path string) (*sql.DB, bool, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, false, fmt.Errorf("store: inspect %s: %w", path, err)
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("store: inspect %s: %w", path, err)
	}
	// Read-only. With no write-ahead log beside it, no process has the
	// file open and its content is all in it: read it as immutable, for a
	// read-only open of a WAL database would otherwise create the -wal
	// and -shm files (and leave them). With one, another process may be
	// writing: read through it, as any reader would.
	params := "mode=ro&_pragma=busy_timeout(5000)"
	if _, err := os.Stat(abs + "-wal"); errors.Is(err, os.ErrNotExist) {
		params = "mode=ro&immutable=1"
	}
	dsn := (&url.URL{Scheme: "file", OmitHost: true, Path: abs, RawQuery: params}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, false, fmt.Errorf("store: inspect %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, true, nil
}

// InspectLease reads the lease name of the database at path read-only, as
// Inspect reads, with the host clock now (the clock the store's leases
// are on). A database that does not exist or has no leases table (an
// older schema) has no lease: found is false.
func InspectLease(ctx context.Context, path, name string) (l store.Lease, found bool, now time.Time, err error) {
	db, exists, err := openInspect(path)
	if err != nil || !exists {
		return store.Lease{}, false, time.Now(), err
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'leases'`).Scan(&n); err != nil {
		return store.Lease{}, false, time.Time{}, fmt.Errorf("store: inspect %s: %w", path, err)
	}
	if n == 0 {
		return store.Lease{}, false, time.Now(), nil
	}
	r, found, err := readLease(ctx, db, name)
	if err != nil {
		return store.Lease{}, false, time.Time{}, fmt.Errorf("store: inspect %s: lease %q: %w", path, name, err)
	}
	return r.lease(name), found, time.Now(), nil
}

func inspect(ctx context.Context, db *sql.DB, documents []string) (Contents, error) {
	c := Contents{Exists: true, Documents: map[string]store.Document{}}
	has := func(table string) (bool, error) {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&n)
		return n > 0, err
	}
	if ok, err := has("schema_migrations"); err != nil {
		return Contents{}, err
	} else if ok {
		ms, err := loadMigrations(migrationFiles)
		if err != nil {
			return Contents{}, err
		}
		if _, err := schemaVersion(ctx, db, len(ms)); err != nil {
			return Contents{}, err // a newer schema
		}
	}
	if ok, err := has("keys"); err != nil {
		return Contents{}, err
	} else if ok {
		if c.Keys, err = listKeys(ctx, db); err != nil {
			return Contents{}, fmt.Errorf("key records: %w", err)
		}
	}
	ok, err := has("documents")
	if err != nil || !ok {
		return c, err
	}
	for _, name := range documents {
		d := store.Document{Name: name}
		var updated int64
		err := db.QueryRowContext(ctx, `SELECT seq, body, meta, updated_at FROM documents WHERE name = ?`, name).Scan(&d.Seq, &d.Body, &d.Meta, &updated)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return Contents{}, fmt.Errorf("document %q: %w", name, err)
		default:
			d.UpdatedAt = store.FromNanos(updated)
			c.Documents[name] = d
		}
	}
	return c, nil
}
