package postgres

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/pgtest"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/storetest"
)

// benchStore opens a store on a fresh database of a cluster of its own with
// fsync on: commit rates without fsync say nothing about a real server.
func benchStore(b *testing.B, c *pgtest.Cluster) *Store {
	b.Helper()
	url, err := c.NewDatabase(b.Context(), "")
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(b.Context(), Config{URL: url, MaxConns: 16})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.CreateKey(b.Context(), newKey(b, "k1"), nil); err != nil {
		b.Fatal(err)
	}
	return s
}

func benchCluster(b *testing.B) *pgtest.Cluster {
	b.Helper()
	c, err := pgtest.Start(b.Context(), pgtest.Options{Fsync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkAppendAudit measures AppendAudit transactions (head row lock, the
// revoked-key check, one INSERT of the batch, fsync'd COMMIT) with batches
// of 1 and 64 records, from 1 writer and from 8 concurrent writers, which
// queue on the audit head's row lock.
func BenchmarkAppendAudit(b *testing.B) {
	c := benchCluster(b)
	for _, size := range []int{1, 64} {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("batch=%d/writers=%d", size, writers), func(b *testing.B) {
				s := benchStore(b, c)
				batch := make([]audit.Record, size)
				for i := range batch {
					batch[i] = record(fmt.Sprint(i))
				}
				b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0)))
				if writers == 1 {
					b.SetParallelism(1)
				}
				var txns atomic.Int64
				b.ResetTimer()
				if writers == 1 {
					for b.Loop() {
						if _, err := s.AppendAudit(context.Background(), batch); err != nil {
							b.Fatal(err)
						}
					}
					txns.Store(int64(b.N))
				} else {
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := s.AppendAudit(context.Background(), batch); err != nil {
								b.Error(err)
								return
							}
							txns.Add(1)
						}
					})
				}
				b.ReportMetric(float64(size)*float64(txns.Load())/b.Elapsed().Seconds(), "records/s")
				b.ReportMetric(float64(txns.Load())/b.Elapsed().Seconds(), "txns/s")
			})
		}
	}
}

// BenchmarkBatcherCommit is the daemon's path: 32 goroutines each committing
// one record at a time through an audit.Batcher onto PostgreSQL.
func BenchmarkBatcherCommit(b *testing.B) {
	s := benchStore(b, benchCluster(b))
	storetest.BenchBatcherCommit(b, s, record("r"))
}

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
