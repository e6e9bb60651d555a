package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/events"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// benchSecret is a Standard Webhooks secret for benchmarks only.
const benchSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// BenchmarkSignEvents is what delivering events costs signing: the daemon's
// sign path without transport (as BenchmarkAuthoritySign, 16 callers, the
// transparency log on) with the duties running, without event sinks
// (sinks=0) and with two (sinks=2: a webhook on loopback, signed, one
// event per request, and a JSON-lines file, synced per batch), which
// deliver while the cards are signed, on the same cores. It reports the
// cards signed per second (signs/s), the process's CPU time per card and,
// with sinks, how far behind the webhook was when signing stopped
// (lag-records) and how long it then took to deliver the rest
// (catch-up-ms). docs/benchmarks.md "Events".
//
//	go test -run '^$' -bench SignEvents -benchtime 3000x -count 3 ./server
func BenchmarkSignEvents(b *testing.B) {
	card := testsupport.Card(b, "security.json")
	for _, sinks := range []int{0, 2} {
		b.Run(fmt.Sprintf("sinks=%d", sinks), func(b *testing.B) {
			dir := b.TempDir()
			var evs EventsSettings
			if sinks == 2 {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
				b.Cleanup(srv.Close)
				wh, err := events.NewWebhook(events.WebhookConfig{URL: srv.URL, Secrets: []string{benchSecret}})
				if err != nil {
					b.Fatal(err)
				}
				f, err := events.NewFile(events.FileConfig{Path: filepath.Join(dir, "events.jsonl")})
				if err != nil {
					b.Fatal(err)
				}
				evs = EventsSettings{Source: "urn:cardsign:bench", Sinks: []events.SinkConfig{{Name: "hook", Sink: wh}, {Name: "file", Sink: f}}}
			}
			st := openStore(b, dir)
			a := newAuthorityWith(b, st, dir, slog.New(slog.DiscardHandler), func(c *Config) { c.Events = evs })
			ctx, cancel := context.WithCancel(b.Context())
			done := make(chan struct{})
			go func() { a.RunDuties(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			testsupport.WaitFor(b, "the duties lease", 10*time.Second, a.duties.holding)
			id := access.Identity{Name: "bench", Roles: []access.Role{access.RoleSigner}}
			b.SetParallelism(16)
			b.ResetTimer()
			cpu := processCPU(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := a.Sign(b.Context(), SignRequest{Card: card, Caller: "bench", Identity: id, RequestID: "r"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "signs/s")
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			if sinks > 0 {
				// Delivery goes on after the burst: how far behind the
				// webhook was, and how long it took to catch up.
				head, _, _ := st.AuditHead(b.Context())
				c, _ := st.EventCursor(b.Context(), "hook")
				b.ReportMetric(float64(head-c.Seq), "lag-records")
				start := time.Now()
				testsupport.WaitFor(b, "the webhook to catch up", time.Minute, func() bool {
					c, _ := st.EventCursor(b.Context(), "hook")
					return c.Seq == head
				})
				b.ReportMetric(float64(time.Since(start).Milliseconds()), "catch-up-ms")
			}
		})
	}
}
