package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/store/storetest"
)

// BenchmarkScaleStartup measures cardsignd's start-up, from exec to its
// "cardsignd ready" line, on an empty data directory and on one whose
// SQLite audit log holds CARDSIGN_SCALE_RECORDS records (default
// 1,000,000, written with the store library in batches of 10,000). Each
// data directory is started once first (that start makes the first key),
// then timed over 5 starts. Run it once:
//
//	go test -run '^$' -bench ScaleStartup -benchtime 1x ./cmd/cardsignd/
func BenchmarkScaleStartup(b *testing.B) {
	large := 1_000_000
	if v := os.Getenv("CARDSIGN_SCALE_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("CARDSIGN_SCALE_RECORDS=%q: want a number of records", v)
		}
		large = n
	}
	for _, n := range []int{0, large} {
		data := filepath.Join(b.TempDir(), "data")
		if err := os.Mkdir(data, 0o700); err != nil {
			b.Fatal(err)
		}
		if n > 0 {
			took := fillDaemonLog(b, filepath.Join(data, sqliteFile), n)
			b.Logf("records=%d: filled in %s", n, took.Round(time.Millisecond))
		}
		startDaemonEnv(b, nil, data, "--log-level", "info").stop() // makes the first key
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			var all []time.Duration
			for b.Loop() {
				for range 5 {
					t0 := time.Now()
					d := startDaemonEnv(b, nil, data, "--log-level", "info")
					all = append(all, time.Since(t0))
					d.stop()
				}
			}
			slices.Sort(all)
			b.ReportMetric(float64(all[len(all)/2])/float64(time.Millisecond), "p50-ms-to-ready")
			b.ReportMetric(float64(all[len(all)-1])/float64(time.Millisecond), "max-ms-to-ready")
		})
	}
}

// fillDaemonLog appends n signed-card records of realistic size to the
// SQLite database at path.
func fillDaemonLog(b *testing.B, path string, n int) time.Duration {
	b.Helper()
	st, err := sqlite.Open(b.Context(), path)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	return storetest.FillAudit(b, st, n, "filler-key")
}
