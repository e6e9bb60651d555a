package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/cardsign/cardsign/audit"
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

// countingCommitter counts the transactions a Batcher runs.
type countingCommitter struct {
	*Store
	txns atomic.Int64
}

func (c *countingCommitter) AppendAudit(ctx context.Context, recs []audit.Record) ([]audit.Record, error) {
	c.txns.Add(1)
	return c.Store.AppendAudit(ctx, recs)
}

// BenchmarkBatcherCommit is the daemon's path: 32 goroutines each committing
// one record at a time through an audit.Batcher onto SQLite.
func BenchmarkBatcherCommit(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := &countingCommitter{Store: s}
	bt := audit.NewBatcher(c, 0)
	defer bt.Close()
	rec := record("r")
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0))) // 32 goroutines in all
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := bt.Commit(context.Background(), []audit.Record{rec}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.N)/float64(max(1, c.txns.Load())), "records/txn")
}
