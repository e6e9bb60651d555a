package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// migrationFiles holds the schema, one file per version: NNNN_name.sql,
// numbered from 1 without gaps. A released migration is never edited; a
// schema change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads migrations/*.sql from fsys, ordered by version.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", base)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d (versions run from 1 without gaps or repeats)", m.name, i+1)
		}
	}
	return ms, nil
}

// migrate applies, in order, every migration the database lacks, all in
// one write transaction together with their schema_migrations rows, so a
// failed migration leaves no trace, two processes opening a new file at once
// apply them exactly once, and a new file costs one durable commit rather
// than one per migration (several processes opening a new file at once each
// wait for the others' commits). A database whose schema is newer than this
// binary knows is refused: writing to it could break invariants the newer
// schema relies on.
func (s *core) migrate(ctx context.Context, fsys fs.FS) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	current, err := schemaVersion(ctx, s.db, len(ms))
	if err != nil || current == len(ms) {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		// Read again under the write lock: another process may have
		// applied some or all of them since.
		current, err := schemaVersion(ctx, tx, len(ms))
		if err != nil {
			return err
		}
		for _, m := range ms[current:] {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("migrate: %s: %w", m.name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, m.version, time.Now().UnixNano()); err != nil {
				return fmt.Errorf("migrate: %s: %w", m.name, err)
			}
		}
		return nil
	})
}

// schemaVersion returns the highest applied migration, refusing one newer
// than known.
func schemaVersion(ctx context.Context, q rowQuerier, known int) (int, error) {
	var current int
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	if current > known {
		return 0, fmt.Errorf("migrate: database schema version %d is newer than this cardsign supports (%d): upgrade cardsignd", current, known)
	}
	return current, nil
}
