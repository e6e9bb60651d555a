package storetest

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store"
)

// countingCommitter counts the transactions a Batcher runs.
type countingCommitter struct {
	store.AuditLog
	txns atomic.Int64
}

func (c *countingCommitter) AppendAudit(ctx context.Context, recs []audit.Record) ([]audit.Record, error) {
	c.txns.Add(1)
	return c.AuditLog.AppendAudit(ctx, recs)
}

// BenchBatcherCommit is the daemon's path, which both stores' benchmarks
// run: 32 goroutines each committing rec, one record at a time, through an
// audit.Batcher onto s. It reports records/s and records per transaction.
func BenchBatcherCommit(b *testing.B, s store.AuditLog, rec audit.Record) {
	cc := &countingCommitter{AuditLog: s}
	bt := audit.NewBatcher(cc, 0)
	defer bt.Close()
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
	b.ReportMetric(float64(b.N)/float64(max(1, cc.txns.Load())), "records/txn")
}
