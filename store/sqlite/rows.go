package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlrows"
)

// querier is what the row reads need of *sql.DB and *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// rowsOf gives a database/sql database or transaction to the shared row layer.
func rowsOf(q querier) sqlrows.Querier { return sqlrows.Adapt(q.QueryContext) }

// values are SQLite's forms: times are BIGINT unix nanoseconds UTC
// (store.Nanos), lists of strings a JSON array in TEXT.
type values struct{}

// Time scans a BIGINT of unix nanoseconds.
func (values) Time() (any, func() (time.Time, error)) {
	var n int64
	return &n, func() (time.Time, error) { return store.FromNanos(n), nil }
}

// Strings scans a JSON array of strings.
func (values) Strings() (any, func() ([]string, error)) {
	var text string
	return &text, func() ([]string, error) {
		var s []string
		if err := json.Unmarshal([]byte(text), &s); err != nil {
			return nil, err
		}
		return s, nil
	}
}
