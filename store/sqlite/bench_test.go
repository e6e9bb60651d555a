package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/storetest"
)

// BenchmarkAppendAudit measures one durable transaction (BEGIN IMMEDIATE,
// head read, inserts, fsync'd COMMIT) per op, with 1 and 64 records.
func BenchmarkAppendAudit(b *testing.B) {
	for _, size := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			batch := make([]audit.Record, size)
			for i := range batch {
				batch[i] = record(fmt.Sprint(i))
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.AppendAudit(b.Context(), batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkBatcherCommit is the daemon's path: 32 goroutines each committing
// one record at a time through an audit.Batcher onto SQLite.
func BenchmarkBatcherCommit(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchBatcherCommit(b, s, record("r"))
}

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
