package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/storetest"
)

// BenchmarkScale checks that appending to the audit log and opening the
// store cost the same with 1,000 and with 1,000,000 records
// (CARDSIGN_SCALE_RECORDS); see storetest.BenchScale. Run it once:
//
//	go test -run '^$' -bench Scale -benchtime 1x ./store/sqlite/
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{1000, storetest.ScaleRecords(b)} {
		path := filepath.Join(b.TempDir(), "scale.db")
		storetest.BenchScale(b, func(ctx context.Context) (store.Store, error) { return Open(ctx, path) }, n)
		if fi, err := os.Stat(path); err == nil {
			b.Logf("records=%d: database file %.1f MB", n, float64(fi.Size())/1e6)
		}
	}
}
