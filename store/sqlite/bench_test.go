package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cardsign/cardsign/audit"
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
