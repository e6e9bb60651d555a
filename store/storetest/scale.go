package storetest

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
	"github.com/cardsign/cardsign/store"
)

// The scale benchmark both stores run: appending to the audit log, opening
// the store and reading a page must cost the same with 1,000 and with
// 1,000,000 records.

// ScaleRecords is the size of the large log: CARDSIGN_SCALE_RECORDS,
// default 1,000,000.
func ScaleRecords(b *testing.B) int {
	if v := os.Getenv("CARDSIGN_SCALE_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("CARDSIGN_SCALE_RECORDS=%q: want a number of records, at least 1000", v)
		}
		return n
	}
	return 1_000_000
}

// ScaleRecord is a signed-card record the size of a real one (a compact JWS
// signature of ≈ 200 characters) by kid.
func ScaleRecord(i int, kid string) audit.Record {
	return audit.Record{
		Time: time.Now(), Caller: "spiffe://example.org/ci", RequestID: fmt.Sprintf("req-%d", i),
		CardName: "Recipe Agent", CardVersion: "1.0.0", CanonicalSHA256: bytes.Repeat([]byte{byte(i)}, 32),
		KID: kid, Alg: "ES256", Profile: "spec", Signature: strings.Repeat("x", 200),
	}
}

// FillAudit appends n ScaleRecords in transactions of 10,000 and returns
// how long it took.
func FillAudit(b *testing.B, s store.Store, n int, kid string) time.Duration {
	b.Helper()
	start := time.Now()
	batch := make([]audit.Record, 0, 10_000)
	for done := 0; done < n; {
		batch = batch[:0]
		for i := range min(cap(batch), n-done) {
			batch = append(batch, ScaleRecord(done+i, kid))
		}
		if _, err := s.AppendAudit(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		done += len(batch)
	}
	return time.Since(start)
}

// Latencies runs op reps times per b.N and reports the median, 99th
// percentile and mean in microseconds.
func Latencies(b *testing.B, reps int, op func()) {
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

// BenchScale fills the fresh store open returns with n records, then runs
// the sub-benchmarks LABEL/open (a new handle and AuditHead: cardsignd's
// start-up work with the store), LABEL/append=1 and =64 (the durable
// transaction of a sign, alone or group-committed) and LABEL/list-page-first
// and -last (one ListAudit page of 1,000).
func BenchScale(b *testing.B, open Opener, n int) {
	label := fmt.Sprintf("records=%d", n)
	s, err := open(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	took := FillAudit(b, s, n, "k1")
	b.Logf("%s: filled in %s (%.0f records/s)", label, took.Round(time.Millisecond), float64(n)/took.Seconds())
	b.Run(label+"/open", func(b *testing.B) {
		Latencies(b, 5, func() {
			s, err := open(context.Background())
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
	for _, size := range []int{1, 64} {
		batch := make([]audit.Record, size)
		for i := range batch {
			batch[i] = ScaleRecord(i, "k1")
		}
		b.Run(fmt.Sprintf("%s/append=%d", label, size), func(b *testing.B) {
			Latencies(b, 200, func() {
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
			Latencies(b, 20, func() {
				recs, err := s.ListAudit(context.Background(), at.after, 1000)
				if err != nil || len(recs) != 1000 {
					b.Fatalf("ListAudit(%d, 1000) = %d records, %v", at.after, len(recs), err)
				}
			})
		})
	}
}
