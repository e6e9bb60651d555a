package sqlite

import (
	"database/sql"
	"time"

	"github.com/cardsign/cardsign/store"
)

// Times are stored as INTEGER unix nanoseconds UTC (store.Nanos); these
// are the nullable columns' forms.

func toNullNanos(t *time.Time) (sql.NullInt64, error) {
	if t == nil {
		return sql.NullInt64{}, nil
	}
	n, err := store.Nanos(*t)
	if err != nil {
		return sql.NullInt64{}, err
	}
	return sql.NullInt64{Int64: n, Valid: true}, nil
}

func fromNullNanos(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := store.FromNanos(n.Int64)
	return &t
}
