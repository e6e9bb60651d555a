package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/store/sqlite"
)

// BenchmarkAuthoritySign is the daemon's sign path without transport:
// policy, canonical forms, signatures, local verification, the durable audit
// commit (SQLite, group commit), metrics. With -cpu 2 and RunParallel it
// shows what a loaded daemon spends per card beyond signer.Sign; cpu-ns/op
// is the process's CPU time per card (BenchmarkAuthoritySignLog).
// Run: go test -run '^$' -bench AuthoritySign -benchtime 3s -cpuprofile cpu.out ./server
func BenchmarkAuthoritySign(b *testing.B) {
	card := testsupport.Card(b, "security.json")
	a, _ := newAuthority(b)
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.Sign(b.Context(), SignRequest{Card: card, Caller: "bench", Identity: access.Identity{Name: "bench"}, RequestID: "r"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkAuthoritySignLog is the daemon's sign path without transport
// as cardsignd runs it (GOGC=400 unless GOGC is set, audit.batch_size 512,
// the spec's §8.5 sample card with unknown keys stripped, as scripts/bench
// sends it, 32 callers at once like its load generator), without the
// transparency log (log=off: Config.Log nil, so no checkpoint and no
// proofs; the store keeps the tree either way) and with it (log=on),
// everything else equal. -cpu 1 is the daemon on one core. It reports the
// audit records per durable commit (records/commit): under load the
// batcher puts many in each, and the process's CPU time per card
// (cpu-ns/op: on a shared machine the wall time per card, ns/op, includes
// waiting for the CPU; this does not).
//
// Package testing runs a sub-benchmark -count times in a row, so the
// pairs are made by running the test binary several times with -count 1:
// each run measures log=off, then log=on.
//
//	go test -c -o server.test ./server
//	for i in 1 2 3 4 5 6; do ./server.test -test.run '^$' -test.bench AuthoritySignLog -test.benchtime 2000x -test.cpu 1 -test.benchmem; done
func BenchmarkAuthoritySignLog(b *testing.B) {
	card := testsupport.Card(b, "spec-sample.json")
	if _, set := os.LookupEnv("GOGC"); !set {
		// The collector's target as cardsignd sets it (cmd/cardsignd).
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	for _, log := range []bool{false, true} {
		name := "log=off"
		if log {
			name = "log=on"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			st := &commitCounter{Store: openStore(b, dir)}
			a := newAuthorityWith(b, st, dir, slog.New(slog.DiscardHandler), func(c *Config) {
				c.AuditBatch = 512 // the daemon's default (audit.batch_size)
				if !log {
					c.Log = nil
				}
			})
			req := SignRequest{Card: card, StripUnknown: true, Caller: "bench", Identity: access.Identity{Name: "bench"}, RequestID: "r"}
			b.SetParallelism(32)
			b.ReportAllocs()
			st.reset()
			b.ResetTimer()
			cpu := processCPU(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := a.Sign(b.Context(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			if commits := st.commits.Load(); commits > 0 {
				b.ReportMetric(float64(st.records.Load())/float64(commits), "records/commit")
			}
		})
	}
}

// commitCounter counts the audit transactions and records appended through
// it, for BenchmarkAuthoritySignLog's records/commit.
type commitCounter struct {
	*sqlite.Store
	commits, records atomic.Int64
}

func (s *commitCounter) AppendAudit(ctx context.Context, recs []audit.Record) ([]audit.Record, error) {
	out, err := s.Store.AppendAudit(ctx, recs)
	if err == nil {
		s.commits.Add(1)
		s.records.Add(int64(len(out)))
	}
	return out, err
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (s *commitCounter) reset() { s.commits.Store(0); s.records.Store(0) }

// BenchmarkResign1000 times the registry's re-signing of 1,000 registered
// cards after a rotation (each then carries the active and the pending key's
// signatures: 2,000 signatures and audit records, 1,000 registry versions),
// file ES256 keys, SQLite. Run: go test -run '^$' -bench Resign1000 -benchtime 1x ./server
func BenchmarkResign1000(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		a, _ := newAuthority(b)
		ctx := b.Context()
		card := registryCardB(b)
		for i := range 1000 {
			if _, err := a.Sign(ctx, SignRequest{Card: card, Caller: "token:ci", RequestID: "r", Registration: &Registration{AgentID: fmt.Sprintf("agent-%04d", i)}}); err != nil {
				b.Fatal(err)
			}
		}
		hour := time.Hour
		if _, err := a.admin.RotateKey(ctx, "", &hour); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		b.StartTimer()
		if err := resignAll(ctx, a); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/1000cards")
		b.StartTimer()
	}
}

// benchWriter is a reusable http.ResponseWriter that keeps nothing but the
// status and the byte count: the benchmarks measure the handlers, not a
// recorder.
type benchWriter struct {
	h    http.Header
	code int
	n    int
}

func newBenchWriter() *benchWriter { return &benchWriter{h: make(http.Header, 8)} }

func (w *benchWriter) Header() http.Header { return w.h }
func (w *benchWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *benchWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.n += len(b)
	return len(b), nil
}
func (w *benchWriter) reset() { clear(w.h); w.code, w.n = 0, 0 }

// benchDocument fetches a document once through h, for its bytes and ETag.
func benchDocument(b *testing.B, h http.Handler, path string) (body []byte, etag string) {
	b.Helper()
	w := &recordingWriter{benchWriter: newBenchWriter()}
	r, _ := http.NewRequestWithContext(b.Context(), http.MethodGet, path, nil)
	h.ServeHTTP(w, r)
	if w.code != http.StatusOK || len(w.body) == 0 || w.h.Get("ETag") == "" {
		b.Fatalf("%s: %d, %d bytes, ETag %q", path, w.code, len(w.body), w.h.Get("ETag"))
	}
	return w.body, w.h.Get("ETag")
}

type recordingWriter struct {
	*benchWriter
	body []byte
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	w.body = append(w.body, b...)
	return w.benchWriter.Write(b)
}

// runHandler serves r through h b.N times over GOMAXPROCS goroutines, each
// with its own request and writer, and checks the status.
func runHandler(b *testing.B, h http.Handler, path, ifNoneMatch string, want int) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r, _ := http.NewRequestWithContext(b.Context(), http.MethodGet, path, nil)
		if ifNoneMatch != "" {
			r.Header["If-None-Match"] = []string{ifNoneMatch}
		}
		w := newBenchWriter()
		for pb.Next() {
			w.reset()
			h.ServeHTTP(w, r)
			if w.code != want {
				b.Fatalf("status %d, want %d", w.code, want)
			}
		}
	})
}

// BenchmarkJWKSHandler is the JWKS endpoint as cardsignd mounts it (the
// request counter included, the mux not), for a full answer and for a
// revalidation. Compare with BenchmarkBareHandler, which writes the same
// bytes from a trivial handler.
func BenchmarkJWKSHandler(b *testing.B) {
	a, _ := newAuthority(b)
	h := benchJWKSHandler(a)
	_, etag := benchDocument(b, h, "/.well-known/jwks.json")
	b.Run("200", func(b *testing.B) { runHandler(b, h, "/.well-known/jwks.json", "", http.StatusOK) })
	b.Run("304", func(b *testing.B) { runHandler(b, h, "/.well-known/jwks.json", etag, http.StatusNotModified) })
}

// BenchmarkRevocationsHandler is the revocation document's endpoint, as
// BenchmarkJWKSHandler.
func BenchmarkRevocationsHandler(b *testing.B) {
	a, _ := newAuthority(b)
	h := benchRevocationsHandler(a)
	_, etag := benchDocument(b, h, "/.well-known/cardsign-revocations.json")
	b.Run("200", func(b *testing.B) { runHandler(b, h, "/.well-known/cardsign-revocations.json", "", http.StatusOK) })
	b.Run("304", func(b *testing.B) {
		runHandler(b, h, "/.well-known/cardsign-revocations.json", etag, http.StatusNotModified)
	})
}

// BenchmarkBareHandler writes the JWKS bytes from a trivial handler: the
// floor BenchmarkJWKSHandler is measured against.
func BenchmarkBareHandler(b *testing.B) {
	a, _ := newAuthority(b)
	body, _ := benchDocument(b, benchJWKSHandler(a), "/.well-known/jwks.json")
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) })
	runHandler(b, bare, "/.well-known/jwks.json", "", http.StatusOK)
}

// benchJWKSHandler and benchRevocationsHandler are the handlers
// NewHTTPHandler mounts.
func benchJWKSHandler(a *Authority) http.Handler { return a.docs.newDocumentHandlers().jwks }

func benchRevocationsHandler(a *Authority) http.Handler {
	return a.docs.newDocumentHandlers().revocations
}
