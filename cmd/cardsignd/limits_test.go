package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
)

// goodCard is a card that lints clean and satisfies the default policy.
var goodCard = []byte(`{"name":"Limits","description":"d","supportedInterfaces":[{"url":"https://a.example","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)

// limitsDaemon starts cardsignd with config as its YAML file.
func limitsDaemon(t *testing.T, config string) *daemon {
	t.Helper()
	work := t.TempDir()
	cfg := filepath.Join(work, "cardsignd.yaml")
	writeFile(t, cfg, config)
	if r := runDaemonOnce(t, "--check-config", cfg); r.Code != 0 {
		t.Fatalf("--check-config refused the test config: %s", r.Stderr)
	}
	return startDaemon(t, filepath.Join(work, "data"), "--config", cfg)
}

// dialFrom opens a TCP connection to addr from the loopback address local
// (all of 127/8 is this machine on Linux, so each is another "source").
func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, local, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// h2Handshake speaks the client side of an HTTP/2 connection preface on c
// and returns the server's SETTINGS. The connection then stays open, idle.
func h2Handshake(t *testing.T, c net.Conn) map[http2.SettingID]uint32 {
	t.Helper()
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	for range 10 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's SETTINGS: %v", err)
		}
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() {
			continue
		}
		out := map[http2.SettingID]uint32{}
		_ = sf.ForeachSetting(func(s http2.Setting) error { out[s.ID] = s.Val; return nil })
		_ = fr.WriteSettingsAck()
		return out
	}
	t.Fatal("no SETTINGS frame from the server")
	return nil
}

// closedAtOnce dials addr from local and reports whether the server closed
// the connection without sending anything: the connection limit's answer.
// The reset may already arrive while connecting. It waits at most 10 s.
func closedAtOnce(t *testing.T, local, addr string) bool {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.ECONNRESET)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 64))
	return n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
}

func signOnce(t *testing.T, c pb.SigningServiceClient) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := c.SignCard(ctx, &pb.SignCardRequest{Card: goodCard})
	return err
}

// TestDaemonConnectionLimits: connections beyond the per-address and total
// limits are closed at once while signing on an existing connection goes
// on; a connection that never completes its handshake is closed after the
// handshake timeout; the server advertises the stream and header limits;
// the open file limit is raised and logged.
func TestDaemonConnectionLimits(t *testing.T) {
	d := limitsDaemon(t, `
limits:
  rate: 0
  max_connections: 4
  max_connections_per_ip: 2
  max_streams_per_connection: 3
  max_header_bytes: 8192
  handshake_timeout: 2s
  idle_timeout: 5m
`)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("nofile=%d", lim.Max); !strings.Contains(d.log.String(), want) {
		t.Errorf("the log does not report the raised open file limit (%s):\n%s", want, d.log.String())
	}

	// Handshake timeout: a connection that sends nothing is closed after
	// 2 s (the gRPC default is 120 s). The server speaks first (its
	// SETTINGS), then closes.
	idle := dialFrom(t, "127.0.0.9", d.grpc)
	idle.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.Copy(io.Discard, idle); err != nil {
		t.Fatalf("a connection that never sent the HTTP/2 preface was not closed by the handshake timeout: %v", err)
	}

	signer := dialDaemon(t, d.grpc) // 127.0.0.1, connection 1
	if err := signOnce(t, signer); err != nil {
		t.Fatal(err)
	}
	settings := h2Handshake(t, dialFrom(t, "127.0.0.1", d.grpc)) // connection 2
	if got := settings[http2.SettingMaxConcurrentStreams]; got != 3 {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d, want 3 (limits.max_streams_per_connection)", got)
	}
	if got := settings[http2.SettingMaxHeaderListSize]; got != 8192 {
		t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE = %d, want 8192 (limits.max_header_bytes)", got)
	}
	if !closedAtOnce(t, "127.0.0.1", d.grpc) {
		t.Fatal("a third connection from 127.0.0.1 (max_connections_per_ip: 2) was not closed at once")
	}
	h2Handshake(t, dialFrom(t, "127.0.0.2", d.grpc)) // 3
	h2Handshake(t, dialFrom(t, "127.0.0.2", d.grpc)) // 4
	if !closedAtOnce(t, "127.0.0.3", d.grpc) {
		t.Fatal("a fifth connection (max_connections: 4) was not closed at once")
	}
	if err := signOnce(t, signer); err != nil {
		t.Fatalf("signing on an existing connection at the connection limit: %v", err)
	}

	// The HTTP listener has the same limits of its own.
	dialFrom(t, "127.0.0.4", d.http)
	dialFrom(t, "127.0.0.4", d.http)
	if !closedAtOnce(t, "127.0.0.4", d.http) {
		t.Fatal("a third HTTP connection from 127.0.0.4 was not closed at once")
	}
	resp, body := httpGet(t, "http://"+d.http+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	for _, l := range []map[string]string{
		{"listener": "grpc", "reason": "per_ip"}, {"listener": "grpc", "reason": "total"}, {"listener": "http", "reason": "per_ip"},
	} {
		if metric(t, body, "cardsign_connections_refused_total", l) < 1 {
			t.Errorf("cardsign_connections_refused_total%v not counted", l)
		}
	}
	if metric(t, body, "cardsign_connections", map[string]string{"listener": "grpc"}) != 4 {
		t.Errorf("cardsign_connections{listener=grpc} is not 4")
	}
	d.stop()
}

// TestDaemonHeaderLimits: an oversized header block is refused on both
// listeners, and the daemon keeps serving.
func TestDaemonHeaderLimits(t *testing.T) {
	d := limitsDaemon(t, "limits:\n  rate: 0\n")
	conn := dialPlain(t, d.grpc)
	health := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	// 40 KiB of metadata: over the 16 KiB default, under what the daemon
	// accepted before (16 MiB on gRPC, 64 KiB on HTTP).
	pad := strings.Repeat("x", 40<<10)
	_, err := health.Check(metadata.AppendToOutgoingContext(ctx, "x-pad", pad), &healthpb.HealthCheckRequest{})
	if err == nil {
		t.Fatal("a call with 40 KiB of metadata was accepted (limits.max_header_bytes defaults to 16 KiB)")
	}
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("after an oversized header the daemon must keep serving: %v", err)
	}
	if err := signOnce(t, pb.NewSigningServiceClient(conn)); err != nil {
		t.Fatalf("sign after an oversized header: %v", err)
	}
	resp, _ := httpGet(t, d.jwksURL(), "X-Pad", pad)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("JWKS with a 40 KiB header: %d, want 431", resp.StatusCode)
	}
	if resp, _ := httpGet(t, d.jwksURL()); resp.StatusCode != http.StatusOK {
		t.Fatalf("JWKS after an oversized header: %d", resp.StatusCode)
	}
	d.stop()
}

var summaryLine = regexp.MustCompile(`(\d+) more refusals in the last`)

// TestDaemonRefusalLogIsBounded: 1000 unauthenticated calls write at most
// refusal_log_burst lines per interval and reason, plus summary lines that
// account for the rest.
func TestDaemonRefusalLogIsBounded(t *testing.T) {
	tok, sum := token("limits")
	d := limitsDaemon(t, fmt.Sprintf(`
auth:
  tokens:
    - {name: ci, sha256: %s, roles: [signer]}
limits:
  rate: 0
  refusal_log_burst: 5
  refusal_log_interval: 1s
`, sum))
	c := dialDaemon(t, d.grpc)
	const calls = 1000
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range calls / 4 {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				_, err := c.SignCard(ctx, &pb.SignCardRequest{Card: goodCard})
				cancel()
				if status.Code(err) != codes.Unauthenticated {
					t.Errorf("call without credentials: %v, want Unauthenticated", err)
					return
				}
			}
		})
	}
	wg.Wait()
	windows := int(math.Ceil(time.Since(start).Seconds())) + 1

	// The last summary comes at the end of its interval.
	var lines, summarized int
	for range 50 {
		time.Sleep(200 * time.Millisecond)
		lines, summarized = 0, 0
		sc := bufio.NewScanner(strings.NewReader(d.log.String()))
		for sc.Scan() {
			l := sc.Text()
			if strings.Contains(l, "msg=rpc") && strings.Contains(l, "code=Unauthenticated") {
				lines++
			}
			if m := summaryLine.FindStringSubmatch(l); m != nil && strings.Contains(l, "reason=Unauthenticated") {
				n, _ := strconv.Atoi(m[1])
				summarized += n
			}
		}
		if lines+summarized >= calls {
			break
		}
	}
	if lines > 5*windows {
		t.Errorf("%d refusal lines for %d calls in %d intervals: want at most 5 per interval", lines, calls, windows)
	}
	if lines+summarized != calls {
		t.Errorf("%d refusal lines + %d summarized = %d, want %d:\n%s", lines, summarized, lines+summarized, calls, d.log.String())
	}
	// The token still signs.
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+tok)
	if _, err := dialDaemon(t, d.grpc).SignCard(ctx, &pb.SignCardRequest{Card: goodCard}); err != nil {
		t.Fatalf("sign with the token after the flood: %v", err)
	}
	d.stop()
}

// TestDaemonUnauthenticatedStreamLimits: the built daemon bounds health
// Watch streams (every stream is unauthenticated with authentication off)
// by the configured limits, refuses one more RESOURCE_EXHAUSTED naming the
// setting, and keeps answering calls on the same connection.
func TestDaemonUnauthenticatedStreamLimits(t *testing.T) {
	d := limitsDaemon(t, "limits:\n  rate: 0\n  max_unauthenticated_streams: 3\n  max_unauthenticated_streams_per_ip: 2\n")
	if !strings.Contains(d.log.String(), "max_unauthenticated_streams=3 max_unauthenticated_streams_per_ip=2") {
		t.Errorf("the start-up log does not name the stream limits:\n%s", d.log.String())
	}
	conn := dialPlain(t, d.grpc)
	health := healthpb.NewHealthClient(conn)
	// The watches end before the daemon stops: an open Watch holds a
	// graceful stop until the shutdown timeout.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watch := func() error {
		s, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	for i := range 2 {
		if err := watch(); err != nil {
			t.Fatalf("Watch %d: %v", i+1, err)
		}
	}
	err := watch()
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "limits.max_unauthenticated_streams_per_ip: 2") {
		t.Fatalf("a third Watch from 127.0.0.1: %v, want RESOURCE_EXHAUSTED naming limits.max_unauthenticated_streams_per_ip", err)
	}
	if err := signOnce(t, pb.NewSigningServiceClient(conn)); err != nil {
		t.Fatalf("signing on the same connection: %v", err)
	}
	cancel()
	d.stop()
}
