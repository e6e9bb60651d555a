package sqlite

import (
	"database/sql"
	"fmt"
	"time"
)

// Times are stored as INTEGER unix nanoseconds UTC: exact, ordered, and
// comparable in SQL. That covers the years 1678 to 2262; times outside that
// (the zero time.Time among them) are refused rather than silently changed.

func toNanos(t time.Time) (int64, error) {
	n := t.UnixNano()
	if !time.Unix(0, n).Equal(t) {
		return 0, fmt.Errorf("time %s is outside the storable range (years 1678-2262)", t)
	}
	return n, nil
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func toNullNanos(t *time.Time) (sql.NullInt64, error) {
	if t == nil {
		return sql.NullInt64{}, nil
	}
	n, err := toNanos(*t)
	if err != nil {
		return sql.NullInt64{}, err
	}
	return sql.NullInt64{Int64: n, Valid: true}, nil
}

func fromNullNanos(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}
