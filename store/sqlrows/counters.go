package sqlrows

import "context"

// Counter reads the named counter's value with sql (a SELECT of the value
// taking the name): 0 when the counter was never used.
func Counter(ctx context.Context, q Querier, sql, name string) (int64, error) {
	vals, err := query(ctx, q, func(r Rows) (int64, error) {
		var v int64
		return v, r.Scan(&v)
	}, sql, name)
	if err != nil || len(vals) == 0 {
		return 0, err
	}
	return vals[0], nil
}
