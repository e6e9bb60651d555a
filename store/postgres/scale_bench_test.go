package postgres

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
)

// pgScaleRecords is the size of the large log of BenchmarkScale:
// CARDSIGN_SCALE_RECORDS, default 1,000,000.
func pgScaleRecords(b *testing.B) int {
	if v := os.Getenv("CARDSIGN_SCALE_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("CARDSIGN_SCALE_RECORDS=%q: want a number of records, at least 1000", v)
		}
		return n
	}
	return 1_000_000
}

// pgScaleRecord is a signed-card record the size of a real one (a compact
// JWS signature of ≈ 200 characters), by key k1.
func pgScaleRecord(i int) audit.Record {
	return audit.Record{
		Time: time.Now(), Caller: "spiffe://example.org/ci", RequestID: fmt.Sprintf("req-%d", i),
		CardName: "Recipe Agent", CardVersion: "1.0.0", CanonicalSHA256: bytes.Repeat([]byte{byte(i)}, 32),
		KID: "k1", Alg: "ES256", Profile: "spec", Signature: strings.Repeat("x", 200),
	}
}

// pgLatencies runs op reps times per b.N and reports the median, 99th
// percentile and mean in microseconds.
func pgLatencies(b *testing.B, reps int, op func()) {
	b.Helper()
	var all []time.Duration
	for b.Loop() {
		for range reps {
			t0 := time.Now()
			op()
			all = append(all, time.Since(t0))
		}
	}
	slices.Sort(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(all[len(all)/2]), "p50-µs")
	b.ReportMetric(us(all[len(all)*99/100]), "p99-µs")
	b.ReportMetric(us(sum/time.Duration(len(all))), "mean-µs")
}

// BenchmarkScale is store/sqlite's BenchmarkScale on PostgreSQL (a cluster
// of its own, fsync on): AppendAudit of 1 and 64 records, Open + AuditHead
// (cardsignd's start-up work with the store) and a ListAudit page at the
// start and at the end of the log, with 1,000 records and with
// CARDSIGN_SCALE_RECORDS (default 1,000,000). The log is filled with
// AppendAudit batches of 10,000 records. Run it once:
//
//	go test -run '^$' -bench Scale -benchtime 1x ./store/postgres/
func BenchmarkScale(b *testing.B) {
	c := benchCluster(b)
	for _, n := range []int{1000, pgScaleRecords(b)} {
		label := fmt.Sprintf("records=%d", n)
		url, err := c.NewDatabase(b.Context(), "")
		if err != nil {
			b.Fatal(err)
		}
		s, err := Open(b.Context(), Config{URL: url})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if err := s.CreateKey(b.Context(), newKey(b, "k1"), nil); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		batch := make([]audit.Record, 0, 10_000)
		for done := 0; done < n; {
			batch = batch[:0]
			for i := range min(cap(batch), n-done) {
				batch = append(batch, pgScaleRecord(done+i))
			}
			if _, err := s.AppendAudit(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
			done += len(batch)
		}
		took := time.Since(start)
		b.Logf("%s: filled in %s (%.0f records/s)", label, took.Round(time.Millisecond), float64(n)/took.Seconds())

		b.Run(label+"/open", func(b *testing.B) {
			pgLatencies(b, 5, func() {
				s, err := Open(context.Background(), Config{URL: url})
				if err != nil {
					b.Fatal(err)
				}
				if seq, _, err := s.AuditHead(context.Background()); err != nil || seq < int64(n) {
					b.Fatalf("AuditHead = %d, %v", seq, err)
				}
				s.Close()
			})
		})
		for _, size := range []int{1, 64} {
			batch := make([]audit.Record, size)
			for i := range batch {
				batch[i] = pgScaleRecord(i)
			}
			b.Run(fmt.Sprintf("%s/append=%d", label, size), func(b *testing.B) {
				pgLatencies(b, 200, func() {
					if _, err := s.AppendAudit(context.Background(), batch); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
		head, _, err := s.AuditHead(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, at := range []struct {
			name  string
			after int64
		}{{"first", 0}, {"last", head - 1000}} {
			b.Run(fmt.Sprintf("%s/list-page-%s", label, at.name), func(b *testing.B) {
				// 20 calls: past the 5 after which PostgreSQL may switch a
				// prepared statement to its generic plan.
				pgLatencies(b, 20, func() {
					recs, err := s.ListAudit(context.Background(), at.after, 1000)
					if err != nil || len(recs) != 1000 {
						b.Fatalf("ListAudit(%d, 1000) = %d records, %v", at.after, len(recs), err)
					}
				})
			})
		}
	}
}
