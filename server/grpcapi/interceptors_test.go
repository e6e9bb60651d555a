package grpcapi

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/access/oidc"
	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/internal/oidctest"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/server/servertest"
)

// attemptCounter counts a client's call attempts (gRPC's own retries
// included), which is what the server cannot see.
type attemptCounter struct{ n atomic.Int64 }

func (c *attemptCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (c *attemptCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	if b, ok := s.(*stats.Begin); ok && b.Client && !b.IsTransparentRetryAttempt {
		c.n.Add(1)
	}
}
func (c *attemptCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (c *attemptCounter) HandleConn(context.Context, stats.ConnStats) {}

// TestErrorsAreTrailersOnly: a call the daemon fails, whether the gate
// refuses it or its handler does, carries no response headers, so that a
// client's retry policy can send it again (to another replica). A request
// id sent in headers made every error final: gRPC commits a call to the
// server that sent headers, and `cardsign --server a,b,c` failed after one
// attempt during a database restart. The request id is still echoed, in
// the trailers of an error and the headers of a success.
func TestErrorsAreTrailersOnly(t *testing.T) {
	a, _ := servertest.New(t)
	token := "cst_trailers-only-test-token"
	srv, _ := NewServer(a, slog.New(slog.DiscardHandler), Options{
		Auth: access.New([]access.Token{{Name: "t", SHA256: sha256.Sum256([]byte(token)), Roles: []access.Role{access.RoleSigner}}}, nil),
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	const attempts = 3
	// Retry exactly the codes the calls below fail with: a retried call is
	// one the client saw as trailers-only.
	sc := `{"methodConfig":[{"name":[{"service":"grpc.health.v1.Health"},{"service":"cardsign.v1.SigningService"}],
		"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.001s","backoffMultiplier":1,
		"retryableStatusCodes":["NOT_FOUND","UNAUTHENTICATED"]}}]}`
	counter := &attemptCounter{}
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(sc), grpc.WithStatsHandler(counter))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	health, signing := healthpb.NewHealthClient(conn), pb.NewSigningServiceClient(conn)

	for _, tc := range []struct {
		name string
		call func(ctx context.Context, opts ...grpc.CallOption) error
		want codes.Code
	}{
		{"refused by the handler", func(ctx context.Context, opts ...grpc.CallOption) error {
			_, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "no-such-service"}, opts...)
			return err
		}, codes.NotFound},
		{"refused by the gate", func(ctx context.Context, opts ...grpc.CallOption) error {
			_, err := signing.LintCard(ctx, &pb.LintCardRequest{Card: []byte(`{}`)}, opts...)
			return err
		}, codes.Unauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := counter.n.Load()
			var header, trailer metadata.MD
			err := tc.call(context.Background(), grpc.Header(&header), grpc.Trailer(&trailer))
			if status.Code(err) != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
			if n := counter.n.Load() - before; n != attempts {
				t.Errorf("the client made %d attempts, want %d: the error was not trailers-only", n, attempts)
			}
			if len(header.Get(RequestIDHeader)) != 0 {
				t.Errorf("request id in the headers of an error: %v", header)
			}
			if id := trailer.Get(RequestIDHeader); len(id) != 1 || !validRequestID(id[0]) {
				t.Errorf("trailers %v: want the request id", trailer)
			}
		})
	}

	t.Run("a success echoes the request id in its headers", func(t *testing.T) {
		var header metadata.MD
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token, RequestIDHeader, "req-1")
		if _, err := signing.LintCard(ctx, &pb.LintCardRequest{Card: []byte(`{}`)}, grpc.Header(&header)); err != nil {
			t.Fatal(err)
		}
		if got := header.Get(RequestIDHeader); len(got) != 1 || got[0] != "req-1" {
			t.Errorf("headers %v: want the request id req-1", header)
		}
	})
}

// TestUnauthenticatedStreamLimits: health Watch streams need no
// credentials, so those opened without any are bounded per source address
// and in all; over a bound the stream is refused RESOURCE_EXHAUSTED naming
// the setting, a slot given back is reusable, and a watcher that sends
// credentials (as cardsign does) is not counted.
func TestUnauthenticatedStreamLimits(t *testing.T) {
	a, _ := servertest.New(t)
	token := "cst_stream-limit-test-token"
	srv, _ := NewServer(a, slog.New(slog.DiscardHandler), Options{
		Auth:                           access.New([]access.Token{{Name: "t", SHA256: sha256.Sum256([]byte(token)), Roles: []access.Role{access.RoleSigner}}}, nil),
		MaxUnauthenticatedStreams:      5,
		MaxUnauthenticatedStreamsPerIP: 3,
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	// One connection per source address (every 127/8 address is this
	// machine's).
	conns := map[string]*grpc.ClientConn{}
	from := func(src string) healthpb.HealthClient {
		if c := conns[src]; c != nil {
			return healthpb.NewHealthClient(c)
		}
		c, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
				return d.DialContext(ctx, "tcp", addr)
			}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[src] = c
		return healthpb.NewHealthClient(c)
	}
	// watch opens a Watch and waits for its first answer: the status, or
	// the refusal.
	watch := func(src string, withToken bool) (context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		if withToken {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		s, err := from(src).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			var res *healthpb.HealthCheckResponse
			if res, err = s.Recv(); err == nil && res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("Watch from %s: %s", src, res.GetStatus())
			}
		}
		return cancel, err
	}
	admitted := func(src string, withToken bool) context.CancelFunc {
		t.Helper()
		cancel, err := watch(src, withToken)
		if err != nil {
			t.Fatalf("Watch from %s (token %v): %v, want it admitted", src, withToken, err)
		}
		return cancel
	}
	refused := func(src, setting string) {
		t.Helper()
		_, err := watch(src, false)
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), setting+":") {
			t.Fatalf("Watch from %s: %v, want RESOURCE_EXHAUSTED naming %s", src, err, setting)
		}
	}

	first := admitted("127.0.0.1", false)
	admitted("127.0.0.1", false)
	admitted("127.0.0.1", false)
	refused("127.0.0.1", "limits.max_unauthenticated_streams_per_ip")
	// Credentials make a watcher accountable: not counted.
	for range 5 {
		admitted("127.0.0.1", true)
	}
	// A balancing client's own health Watch carries its per-call
	// credentials: it still reaches this replica.
	balanced, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearerCreds(token)),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { balanced.Close() })
	if _, err := pb.NewSigningServiceClient(balanced).LintCard(context.Background(), &pb.LintCardRequest{Card: []byte(`{}`)}); err != nil {
		t.Fatalf("a health-checking client with a token, with the per-address slots taken: %v", err)
	}
	admitted("127.0.0.2", false)
	admitted("127.0.0.2", false)
	refused("127.0.0.3", "limits.max_unauthenticated_streams")
	// Only long-lived streams are bounded: a health check still answers.
	if res, err := from("127.0.0.3").Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check from 127.0.0.3 with every stream slot taken: %v %v", res, err)
	}

	// A closed stream gives its slot back (once its handler returns).
	first()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cancel, err := watch("127.0.0.3", false)
		if err == nil {
			cancel()
			break
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("Watch from 127.0.0.3 after one was closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bearerCreds sends a bearer token with every call, health checks
// included, over plaintext loopback.
type bearerCreds string

func (b bearerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearerCreds) RequireTransportSecurity() bool { return false }

// TestRefusalsInTheLog: a refused call's log line names its source address
// and the gate's reason, and a valid identity token that no auth.oidc rule
// matches is told "no rule matched", not a bare "permission denied".
func TestRefusalsInTheLog(t *testing.T) {
	a, _ := servertest.New(t)
	is := oidctest.New(t)
	v, err := oidc.New(context.Background(), oidc.Config{
		Issuers: []oidc.IssuerConfig{{Issuer: is.URL, Audience: "cardsign"}},
		Rules:   []oidc.RoleRule{{Issuer: is.URL, Claims: map[string]string{"repository": "acme/payments"}, Roles: []string{"signer"}}},
	}, oidc.Options{HTTPClient: is.Client})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testsupport.SyncBuffer{}
	srv, _ := NewServer(a, slog.New(slog.NewTextHandler(logs, nil)), Options{
		Auth: access.New([]access.Token{
			{Name: "t", SHA256: sha256.Sum256([]byte("cst_x")), Roles: []access.Role{access.RoleAuditor}},
			{Name: "s", SHA256: sha256.Sum256([]byte("cst_s")), Roles: []access.Role{access.RoleSigner}},
		}, nil).WithIDTokens(v),
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	signing := pb.NewSigningServiceClient(conn)

	other := oidctest.GitHubClaims("cardsign")
	other["repository"] = "acme/shop"
	for _, tc := range []struct {
		name, bearer string
		code         codes.Code
		message      string // in the status and the log line
	}{
		{"no credentials", "", codes.Unauthenticated, "authentication required"},
		{"unknown token", "cst_unknown", codes.Unauthenticated, "authentication required"},
		{"refused identity token", is.Mint(oidctest.GitHubClaims("someone-else")), codes.Unauthenticated, "identity token refused: audience"},
		{"identity token matching no rule", is.Mint(other), codes.PermissionDenied, "no rule matched"},
		{"token without the role", "cst_x", codes.PermissionDenied, "permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "refusal-" + strings.ReplaceAll(tc.name, " ", "-")
			ctx := metadata.AppendToOutgoingContext(context.Background(), RequestIDHeader, id)
			if tc.bearer != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tc.bearer)
			}
			_, err := signing.LintCard(ctx, &pb.LintCardRequest{Card: []byte(`{}`)})
			if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.message) {
				t.Fatalf("got %v, want %s saying %q", err, tc.code, tc.message)
			}
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "request_id="+id) {
					line = l
				}
			}
			if !strings.Contains(line, "peer=127.0.0.1:") || !strings.Contains(line, tc.message) {
				t.Errorf("log line %q: want the peer address and %q", line, tc.message)
			}
		})
	}
	// A call its handler fails is logged with its address too.
	ctx := metadata.AppendToOutgoingContext(context.Background(), RequestIDHeader, "refusal-by-handler", "authorization", "Bearer cst_s")
	if _, err := signing.SignCard(ctx, &pb.SignCardRequest{Card: []byte(`not json`)}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("SignCard(not json) = %v, want INVALID_ARGUMENT", err)
	}
	if !regexp.MustCompile(`request_id=refusal-by-handler caller=token:s peer=127\.0\.0\.1:\d+ code=InvalidArgument`).MatchString(logs.String()) {
		t.Errorf("no line with the peer address for the failed SignCard:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `msg="identity token refused"`) || !strings.Contains(logs.String(), "reason=audience detail=") {
		t.Errorf("no line for the refused identity token:\n%s", logs.String())
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="identity token refused"`) && !strings.Contains(l, "peer=127.0.0.1:") {
			t.Errorf("identity token refusal without the peer address: %s", l)
		}
	}
}

// TestRequestTimeoutCapsDeadline: limits.request_timeout caps every call's
// deadline; a client's shorter deadline is kept as it is (the gate makes no
// context of its own for it).
func TestRequestTimeoutCapsDeadline(t *testing.T) {
	const limit = time.Minute
	g := &gate{log: slog.New(slog.DiscardHandler), opts: Options{RequestTimeout: limit}, metrics: server.NewMetrics()}
	info := &grpc.UnaryServerInfo{FullMethod: pb.SigningService_LintCard_FullMethodName}
	for _, tc := range []struct {
		name   string
		client time.Duration // 0: no deadline
		want   time.Duration
	}{
		{"no client deadline", 0, limit},
		{"client deadline longer", time.Hour, limit},
		{"client deadline shorter", time.Second, time.Second},
		{"client deadline equal", limit, limit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			if tc.client > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.client)
				defer cancel()
			}
			var got time.Duration
			_, err := g.unary(ctx, nil, info, func(ctx context.Context, _ any) (any, error) {
				dl, ok := ctx.Deadline()
				if !ok {
					t.Fatal("the handler's context has no deadline")
				}
				got = time.Until(dl)
				return nil, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got > tc.want || got < tc.want-5*time.Second {
				t.Errorf("handler's deadline in %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFinishLogLevels: a finished call is logged at DEBUG when it succeeded
// and at INFO when it failed; with the level above, nothing is written.
func TestFinishLogLevels(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level slog.Level
		err   error
		want  string // the log line's level; "" for no line
	}{
		{"ok at debug", slog.LevelDebug, nil, "DEBUG"},
		{"ok at info", slog.LevelInfo, nil, ""},
		{"error at info", slog.LevelInfo, status.Error(codes.NotFound, "no such agent"), "INFO"},
		{"error at warn", slog.LevelWarn, status.Error(codes.NotFound, "no such agent"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf strings.Builder
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level}))
			g := &gate{log: log, metrics: server.NewMetrics()}
			err := tc.err
			g.finish(t.Context(), pb.SigningService_SignCard_FullMethodName, "req-1", "anonymous", false, time.Now(), &err)
			out := buf.String()
			if tc.want == "" {
				if out != "" {
					t.Fatalf("logged %q, want nothing", out)
				}
				return
			}
			if !strings.Contains(out, "level="+tc.want) || !strings.Contains(out, "request_id=req-1") || !strings.Contains(out, "msg=rpc") {
				t.Fatalf("logged %q, want an rpc line at %s", out, tc.want)
			}
		})
	}
}
