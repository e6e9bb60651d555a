package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardsign/cardsign/store/sqlrows"
)

// querier is what the row reads need of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// rowsOf gives a pgx pool or transaction to the shared row layer.
type rowsOf struct{ q querier }

// Query runs sql through pgx.
func (r rowsOf) Query(ctx context.Context, sql string, args ...any) (sqlrows.Rows, error) {
	rows, err := r.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err // not a typed nil in a non-nil interface
	}
	return rows, nil
}

// values are PostgreSQL's forms: times are timestamptz, lists of strings
// text[].
type values struct{}

// Time scans a timestamptz.
func (values) Time() (any, func() (time.Time, error)) {
	var t time.Time
	return &t, func() (time.Time, error) { return t.UTC(), nil }
}

// Strings scans a text[].
func (values) Strings() (any, func() ([]string, error)) {
	var s []string
	return &s, func() ([]string, error) { return s, nil }
}
