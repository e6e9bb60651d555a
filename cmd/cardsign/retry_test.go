package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// unavailable is a replica whose SignCard answers UNAVAILABLE (its store
// restarting), after sending response headers when headerFirst is set, as
// cardsignd did before #24 with its request id.
type unavailable struct {
	pb.UnimplementedSigningServiceServer
	headerFirst bool

	mu    sync.Mutex
	calls int
}

func (u *unavailable) SignCard(ctx context.Context, _ *pb.SignCardRequest) (*pb.SignCardResponse, error) {
	u.mu.Lock()
	u.calls++
	u.mu.Unlock()
	if u.headerFirst {
		if err := grpc.SendHeader(ctx, metadata.Pairs("x-request-id", "r1")); err != nil {
			return nil, err
		}
	}
	return nil, status.Error(codes.Unavailable, "store unavailable: database restarting\x1b[2J")
}

func (u *unavailable) seen() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls
}

func serveUnavailable(t *testing.T, u *unavailable) string {
	t.Helper()
	return serveGRPC(t, listenLoopback(t), func(srv *grpc.Server) { pb.RegisterSigningServiceServer(srv, u) })
}

var retryNote = regexp.MustCompile(`(?m)^cardsign sign: SignCard succeeded on attempt (\d+) of at most 4 \(attempt \d+: Unavailable: store unavailable: database restarting\\x1b\[2J\)$`)

// TestRetryOnAnotherReplica: with one replica answering UNAVAILABLE and
// another healthy, every SignCard through --server BAD,GOOD succeeds, and
// the client says on standard error how many attempts a call took. The
// failing replica sends headers before its error in one case (a cardsignd
// from before #24): gRPC's own retry policy gave up on those after one
// attempt, which is how 12 of 500 signs failed during a database restart.
func TestRetryOnAnotherReplica(t *testing.T) {
	clearConnEnv(t)
	for _, tc := range []struct {
		name        string
		headerFirst bool
	}{
		{"trailers-only error", false},
		{"error after response headers", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := &unavailable{headerFirst: tc.headerFirst}
			good := &recorder{}
			list := serveUnavailable(t, bad) + "," + serve(t, nil, good)
			notes := &testsupport.SyncBuffer{}
			cl, err := dial(env{stderr: notes}, &connFlags{cmd: "sign", server: list}, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.close()
			sign := func() error {
				ctx, cancel := cl.ctx(t.Context())
				defer cancel()
				_, err := cl.signing.SignCard(ctx, &pb.SignCardRequest{Card: []byte(`{"name":"test"}`)})
				return err
			}

			// Until both replicas are connected the balancer may offer
			// the failing one alone: those calls may fail.
			deadline := time.Now().Add(30 * time.Second)
			for n, _, _ := good.seen(); n == 0 || bad.seen() == 0; n, _, _ = good.seen() {
				if time.Now().After(deadline) {
					t.Fatalf("after 30s: %d calls reached the healthy replica, %d the failing one", n, bad.seen())
				}
				_ = sign()
			}

			badBefore, goodBefore := bad.seen(), func() int { n, _, _ := good.seen(); return n }()
			notesBefore := len(retryNote.FindAllStringSubmatch(notes.String(), -1))
			const calls = 10
			for i := range calls {
				if err := sign(); err != nil {
					t.Fatalf("call %d: %s", i, describe(err))
				}
			}
			failed := bad.seen() - badBefore
			goodN, _, _ := good.seen()
			if goodN-goodBefore != calls {
				t.Errorf("the healthy replica answered %d calls, want %d", goodN-goodBefore, calls)
			}
			// round_robin alternates between the two: about every other
			// call meets the failing replica first.
			if failed < calls/2-1 {
				t.Errorf("%d of %d calls reached the failing replica: not balanced", failed, calls)
			}
			// Each call that met it says so: one line per call, counting
			// its attempts.
			extra := 0
			lines := retryNote.FindAllStringSubmatch(notes.String(), -1)[notesBefore:]
			for _, m := range lines {
				n, _ := strconv.Atoi(m[1])
				extra += n - 1
			}
			if len(lines) == 0 || extra != failed {
				t.Errorf("%d failed attempts, but the client reported %d in %d notes:\n%s", failed, extra, len(lines), notes.String())
			}
		})
	}

	t.Run("cardsign sign", func(t *testing.T) {
		f := newFixture(t)
		bad := &unavailable{headerFirst: true}
		list := serveUnavailable(t, bad) + "," + serve(t, nil, &recorder{})
		// A new process's first call goes to either replica, at random:
		// run it until one meets the failing replica first.
		for i := 0; ; i++ {
			if i == 60 {
				t.Fatal("60 runs of cardsign sign and none met the failing replica first")
			}
			before := bad.seen()
			r := runCLI(t, "sign", "--server", list, f.cardFile)
			if r.Code != exitOK {
				// Only when the failing replica was the one connected
				// for every attempt.
				if !strings.Contains(r.Stderr, "(after 4 attempts)") || bad.seen()-before != retryAttempts {
					t.Fatalf("exit %d, stderr %s", r.Code, r.Stderr)
				}
				continue
			}
			if bad.seen() == before {
				if strings.Contains(r.Stderr, "attempt") {
					t.Fatalf("a call with one attempt reports attempts: %s", r.Stderr)
				}
				continue
			}
			if m := retryNote.FindStringSubmatch(r.Stderr); m == nil || m[1] != strconv.Itoa(bad.seen()-before+1) {
				t.Fatalf("cardsign sign met the failing replica %d times; stderr %s", bad.seen()-before, r.Stderr)
			}
			return
		}
	})
}
