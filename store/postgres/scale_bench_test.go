package postgres

import (
	"context"
	"testing"

	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/storetest"
)

// BenchmarkScale is storetest.BenchScale on PostgreSQL (a cluster of its
// own, fsync on), with 1,000 records and with CARDSIGN_SCALE_RECORDS
// (default 1,000,000). Run it once:
//
//	go test -run '^$' -bench Scale -benchtime 1x ./store/postgres/
func BenchmarkScale(b *testing.B) {
	c := benchCluster(b)
	for _, n := range []int{1000, storetest.ScaleRecords(b)} {
		url, err := c.NewDatabase(b.Context(), "")
		if err != nil {
			b.Fatal(err)
		}
		storetest.BenchScale(b, func(ctx context.Context) (store.Store, error) { return Open(ctx, Config{URL: url}) }, n)
	}
}
