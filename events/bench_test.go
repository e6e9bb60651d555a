package events

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store/sqlite"
)

// BenchmarkDeliverWebhook is delivery's throughput to one webhook on
// loopback: b.N audit records in a SQLite store, delivered from the start
// by one deliverer to a receiver that reads each request and answers 200
// (verification aside: the receiver is not what is measured), one event
// per request (batch=1) and 100 per request (batch=100). It reports
// events/s, from the deliverer's start to the cursor at the last record.
// docs/benchmarks.md "Events".
//
//	go test -run '^$' -bench DeliverWebhook -benchtime 20000x -count 3 ./events
func BenchmarkDeliverWebhook(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			ctx := b.Context()
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "cardsign.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			for done := 0; done < b.N; {
				n := min(1000, b.N-done)
				recs := make([]audit.Record, n)
				for i := range recs {
					recs[i] = audit.Record{Time: time.Now().UTC(), Caller: "token:ci", RequestID: "r", CardName: "Orders", CardVersion: "1",
						CanonicalSHA256: digest(fmt.Sprint(done + i)), KID: "k1", Alg: "ES256", Profile: "spec", Signature: "c2lnbmF0dXJl",
						Hosts: []string{"orders.example.com"}}
				}
				if _, err := st.AppendAudit(ctx, recs); err != nil {
					b.Fatal(err)
				}
				done += n
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
			defer srv.Close()
			wh, err := NewWebhook(WebhookConfig{URL: srv.URL, Secrets: []string{newSecret(b)}, Batch: batch})
			if err != nil {
				b.Fatal(err)
			}
			d, err := NewDeliverer(st, testBuilder, []SinkConfig{{Name: "hook", Sink: wh}}, Options{Batch: 500, Poll: 5 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			fence := leaseFence(b, st, "bench")
			rctx, cancel := context.WithCancel(ctx)
			b.ResetTimer()
			start := time.Now()
			go func() { _ = d.Run(rctx, fence) }()
			for {
				if s := d.Stats()[0]; s.Cursor >= int64(b.N) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			took := time.Since(start)
			b.StopTimer()
			cancel()
			b.ReportMetric(float64(b.N)/took.Seconds(), "events/s")
		})
	}
}
