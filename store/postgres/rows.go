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
func rowsOf(q querier) sqlrows.Querier { return sqlrows.Adapt(q.Query) }

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
