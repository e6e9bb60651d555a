package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
)

// scaleRecords is the size of the large log of BenchmarkScale:
// CARDSIGN_SCALE_RECORDS, default 1,000,000.
func scaleRecords(b *testing.B) int {
	if v := os.Getenv("CARDSIGN_SCALE_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("CARDSIGN_SCALE_RECORDS=%q: want a number of records, at least 1000", v)
		}
		return n
	}
	return 1_000_000
}

// scaleRecord is a signed-card record the size of a real one (a compact
// JWS signature of ≈ 200 characters).
func scaleRecord(i int) audit.Record {
	return audit.Record{
		Time: time.Now(), Caller: "spiffe://example.org/ci", RequestID: fmt.Sprintf("req-%d", i),
		CardName: "Recipe Agent", CardVersion: "1.0.0", CanonicalSHA256: bytes.Repeat([]byte{byte(i)}, 32),
		KID: "key-2026-01", Alg: "ES256", Profile: "spec", Signature: strings.Repeat("x", 200),
	}
}

// fillScale appends n records to the store in batches of 10,000 (one
// transaction each) and returns how long it took.
func fillScale(b *testing.B, s *Store, n int) time.Duration {
	b.Helper()
	start := time.Now()
	batch := make([]audit.Record, 0, 10_000)
	for done := 0; done < n; {
		batch = batch[:0]
		for i := range min(cap(batch), n-done) {
			batch = append(batch, scaleRecord(done+i))
		}
		if _, err := s.AppendAudit(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		done += len(batch)
	}
	return time.Since(start)
}

// latencies runs op reps times and reports its median, 99th percentile and
// mean in microseconds (ns/op is b.N runs of all reps).
func latencies(b *testing.B, reps int, op func()) {
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

// BenchmarkScale checks that appending to the audit log and opening the
// store cost the same with 1,000 and with 1,000,000 records
// (CARDSIGN_SCALE_RECORDS): AppendAudit of 1 and 64 records (the durable
// transaction of a sign, alone or group-committed), Open (pragmas, the WAL
// checkpoint at open, the migration check) followed by AuditHead, which is
// what cardsignd's start-up does with the store, and one ListAudit page at
// the start and at the end of the log. Run it once:
//
//	go test -run '^$' -bench Scale -benchtime 1x ./store/sqlite/
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{1000, scaleRecords(b)} {
		label := fmt.Sprintf("records=%d", n)
		path := filepath.Join(b.TempDir(), "scale.db")
		s, err := Open(context.Background(), path)
		if err != nil {
			b.Fatal(err)
		}
		took := fillScale(b, s, n)
		b.Logf("%s: filled in %s (%.0f records/s)", label, took.Round(time.Millisecond), float64(n)/took.Seconds())
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		if fi, err := os.Stat(path); err == nil {
			b.Logf("%s: database file %.1f MB", label, float64(fi.Size())/1e6)
		}

		b.Run(label+"/open", func(b *testing.B) {
			latencies(b, 5, func() {
				s, err := Open(context.Background(), path)
				if err != nil {
					b.Fatal(err)
				}
				if seq, _, err := s.AuditHead(context.Background()); err != nil || seq < int64(n) {
					b.Fatalf("AuditHead = %d, %v", seq, err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			})
		})

		s, err = Open(context.Background(), path)
		if err != nil {
			b.Fatal(err)
		}
		for _, size := range []int{1, 64} {
			batch := make([]audit.Record, size)
			for i := range batch {
				batch[i] = scaleRecord(i)
			}
			b.Run(fmt.Sprintf("%s/append=%d", label, size), func(b *testing.B) {
				latencies(b, 200, func() {
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
				latencies(b, 20, func() {
					recs, err := s.ListAudit(context.Background(), at.after, 1000)
					if err != nil || len(recs) != 1000 {
						b.Fatalf("ListAudit(%d, 1000) = %d records, %v", at.after, len(recs), err)
					}
				})
			})
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
