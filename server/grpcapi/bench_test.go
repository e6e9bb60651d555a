package grpcapi

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cardsign/cardsign/access"
	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/ratelimit"
	"github.com/cardsign/cardsign/server/servertest"
)

// BenchmarkSignCardRPC is SignCard as a pipeline calls the daemon: a real
// gRPC server (NewServer: the daemon's interceptor chain and server
// options, authentication off as on loopback, no rate limit, WARN logging)
// and client over loopback TCP, the spec sample card with strip-unknown,
// 32 calls at once over 4 connections. Beside signer's BenchmarkSignES256
// and server's BenchmarkAuthoritySignLog it shows what the transport and
// the interceptors add per card.
// Run: go test -run '^$' -bench SignCardRPC -cpu 1 -benchmem -cpuprofile cpu.out ./server/grpcapi
func BenchmarkSignCardRPC(b *testing.B) {
	a, _ := servertest.New(b)
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// As daemon.newGRPCServer builds it with scripts/bench's config
	// (limits.rate 0, the default limits).
	srv, _ := NewServer(a, log, Options{Auth: access.New(nil, nil), RateLimit: ratelimit.New(0, 0), RequestTimeout: 30 * time.Second})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(lis)
	b.Cleanup(srv.Stop)

	const conns, concurrency = 4, 32
	clients := make([]pb.SigningServiceClient, conns)
	for i := range clients {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		clients[i] = pb.NewSigningServiceClient(conn)
	}
	req := &pb.SignCardRequest{Card: testsupport.Card(b, "spec-sample.json"), StripUnknown: true}
	// One call first: a refusal is a failure, not a fast benchmark.
	if resp, err := clients[0].SignCard(b.Context(), req); err != nil || len(resp.GetSignedCard()) == 0 {
		b.Fatalf("SignCard: %v (%d bytes)", err, len(resp.GetSignedCard()))
	}

	// RunParallel starts parallelism × GOMAXPROCS goroutines.
	b.SetParallelism((concurrency + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, sys0 := processCPU(b), syscalls()
	b.RunParallel(func(p *testing.PB) {
		c := clients[next.Add(1)%conns]
		for p.Next() {
			// As internal/loadgen and the cardsign CLI call: with a deadline.
			ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
			_, err := c.SignCard(ctx, req)
			cancel()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	// On a shared machine wall time per call swings with the neighbours'
	// load; the process's CPU time per call (server and client, both in
	// this process) much less.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	// Reads and writes (sockets, the database; server and client), which
	// a server option may batch: a count, not a time, so steady.
	if sys1 := syscalls(); sys0 >= 0 && sys1 >= 0 {
		b.ReportMetric(float64(sys1-sys0)/float64(b.N), "syscalls/op")
	}
}

// syscalls is the number of read and write system calls this process has
// made (Linux /proc/self/io), -1 where that is not known.
func syscalls() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	var n int64
	for line := range strings.Lines(string(data)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		if k == "syscr" || k == "syscw" {
			c, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return -1
			}
			n += c
		}
	}
	return n
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
