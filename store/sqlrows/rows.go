// Package sqlrows is the row layer the two SQL stores share (store/sqlite
// and store/postgres): how a key record, an audit record, an agent card and
// a card revocation map to columns and back, and the scanning of their
// rows, written once over Rows, which database/sql's *sql.Rows and pgx's
// Rows both are. What differs between the dialects (placeholders, locks,
// how a time or a list of strings is stored) stays in each store and
// reaches this package as SQL text or a Values.
package sqlrows

import (
	"context"
	"time"
)

// Rows is a result set being read: *sql.Rows and pgx.Rows both are one.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Querier runs a query that returns rows: a store's connection pool or a
// transaction, behind a small adapter per dialect.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
}

// Adapt gives the row layer a dialect's query function, whose rows are of
// a concrete type (*sql.Rows, pgx.Rows).
func Adapt[R Rows](query func(ctx context.Context, sql string, args ...any) (R, error)) Querier {
	return querierFunc(func(ctx context.Context, sql string, args ...any) (Rows, error) {
		rows, err := query(ctx, sql, args...)
		if err != nil {
			return nil, err // not a typed nil in a non-nil interface
		}
		return rows, nil
	})
}

// querierFunc is a Querier of a function.
type querierFunc func(ctx context.Context, sql string, args ...any) (Rows, error)

// Query calls f.
func (f querierFunc) Query(ctx context.Context, sql string, args ...any) (Rows, error) {
	return f(ctx, sql, args...)
}

// Values says how a dialect stores the values that differ between the
// stores: a time (SQLite: BIGINT unix nanoseconds; PostgreSQL: timestamptz)
// and a list of strings (SQLite: a JSON array in TEXT; PostgreSQL: text[]).
type Values interface {
	// Time returns a scan destination for a time column and a function
	// that reads the scanned time (in UTC).
	Time() (dest any, get func() (time.Time, error))
	// Strings returns a scan destination for a list column and a function
	// that reads the scanned list.
	Strings() (dest any, get func() ([]string, error))
}

// scanAll reads every row of rows with scan, closing them.
func scanAll[T any](rows Rows, scan func(Rows) (T, error)) ([]T, error) {
	if c, ok := rows.(interface{ Close() }); ok {
		defer c.Close()
	} else if c, ok := rows.(interface{ Close() error }); ok {
		defer c.Close()
	}
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Query runs sql on q and reads every row with scan.
func query[T any](ctx context.Context, q Querier, scan func(Rows) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return scanAll(rows, scan)
}
