package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// dialPlain is a plaintext connection to addr, closed when the test ends.
func dialPlain(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func dialDaemon(t testing.TB, addr string) pb.SigningServiceClient {
	t.Helper()
	return pb.NewSigningServiceClient(dialPlain(t, addr))
}

func TestDaemonHostileInput(t *testing.T) {
	d := startDaemon(t, filepath.Join(t.TempDir(), "data"))
	c := dialDaemon(t, d.grpc)
	good := []byte(`{"name":"A","description":"d","supportedInterfaces":[{"url":"https://a.example","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)
	tests := []struct {
		name      string
		card      []byte
		code      codes.Code
		field     string
		inMessage string
	}{
		{"oversized", append(append([]byte(`{"name":"`), bytes300k()...), `"}`...), codes.InvalidArgument, "$", "max-size"},
		{"beyond the gRPC message cap", make([]byte, 2<<20), codes.ResourceExhausted, "", ""},
		{"malformed", []byte(`{"name":`), codes.InvalidArgument, "name", "syntax"},
		{"duplicate keys", []byte(`{"name":"a","skills":[{"id":"x","id":"y"}]}`), codes.InvalidArgument, "skills[0].id", "duplicate-key"},
		{"lone surrogate", []byte(`{"name":"\ud800"}`), codes.InvalidArgument, "name", "lone-surrogate"},
		{"wrong type", []byte(strings.Replace(string(good), `"version":"1"`, `"version":1`, 1)), codes.InvalidArgument, "version", "type"},
		{"lint failure", []byte(strings.Replace(string(good), `"tags":["t"]`, `"tags":[]`, 1)), codes.InvalidArgument, "skills[0].tags", "required"},
		{"unknown key", []byte(strings.Replace(string(good), `"version":"1"`, `"version":"1","color":"blue"`, 1)), codes.InvalidArgument, "color", "unknown-field"},
		{"not an object", []byte(`[1,2]`), codes.InvalidArgument, "$", "not-object"},
		{"empty", nil, codes.InvalidArgument, "$", "syntax"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := c.SignCard(ctx, &pb.SignCardRequest{Card: tc.card})
			st := status.Convert(err)
			if st.Code() != tc.code {
				t.Fatalf("code %s (%s), want %s", st.Code(), st.Message(), tc.code)
			}
			if tc.field == "" {
				return
			}
			found := false
			for _, det := range st.Details() {
				if br, ok := det.(*errdetails.BadRequest); ok {
					for _, v := range br.GetFieldViolations() {
						if v.GetField() == tc.field && strings.Contains(v.GetDescription(), tc.inMessage) {
							found = true
						}
					}
				}
			}
			if !found {
				t.Fatalf("no BadRequest violation for %s mentioning %q: %v %v", tc.field, tc.inMessage, st.Message(), st.Details())
			}
		})
	}
	// And the daemon still signs.
	if _, err := c.SignCard(t.Context(), &pb.SignCardRequest{Card: good}); err != nil {
		t.Fatalf("after hostile input the daemon must keep serving: %v", err)
	}
	d.stop()
}

// noRateLimit returns the flags of a config without the per-caller rate
// limit, for tests that load the daemon on purpose.
func noRateLimit(t testing.TB) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "unlimited.yaml")
	if err := os.WriteFile(path, []byte("limits:\n  rate: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--config", path}
}

func bytes300k() []byte { return []byte(strings.Repeat("x", 300<<10)) }

// signLoad signs from n goroutines until the returned stop is called,
// which returns every signature value a client received.
func signLoad(t *testing.T, addr string, n int) (stop func() []string) {
	c := dialDaemon(t, addr)
	good := []byte(`{"name":"Load","description":"d","supportedInterfaces":[{"url":"https://a.example","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)
	var (
		mu  sync.Mutex
		got []string
	)
	stopLoad := testsupport.Hammer(t, n, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		res, err := c.SignCard(ctx, &pb.SignCardRequest{Card: good})
		cancel()
		if err != nil {
			// After the kill or during shutdown calls fail: a client
			// that got no answer holds no signature.
			return true
		}
		var card struct{ Signatures []struct{ Signature string } }
		if err := json.Unmarshal(res.GetSignedCard(), &card); err != nil {
			t.Error(err)
			return false
		}
		mu.Lock()
		for _, s := range card.Signatures {
			got = append(got, s.Signature)
		}
		mu.Unlock()
		return true
	})
	return func() []string { stopLoad(); return got }
}

// auditedSignatures returns the signature of every audit record, after
// checking the chain.
func auditedSignatures(t *testing.T, work, addr string) map[string]bool {
	t.Helper()
	if r := cli(t, work, nil, "audit", "verify", "--server", addr); r.Code != 0 {
		t.Fatalf("audit verify after restart: %s%s", r.Stdout, r.Stderr)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(mustCLI(t, work, "audit", "list", "--json", "--server", addr).Stdout), "\n") {
		var rec struct{ Signature string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out[rec.Signature] = true
	}
	return out
}

func TestDaemonCrashKeepsEveryReturnedSignatureAudited(t *testing.T) {
	work := t.TempDir()
	data := filepath.Join(work, "data")
	d := startDaemon(t, data, noRateLimit(t)...)
	received := signLoad(t, d.grpc, 16)
	time.Sleep(1500 * time.Millisecond)
	d.cmd.Process.Signal(syscall.SIGKILL) // kill -9 mid-load
	<-d.exited
	got := received()
	if len(got) < 50 {
		t.Fatalf("only %d signatures before the kill; the load did not run", len(got))
	}
	d = startDaemon(t, data)
	audited := auditedSignatures(t, work, d.grpc)
	for _, s := range got {
		if !audited[s] {
			t.Fatalf("a client received signature %s… that has no audit record", s[:16])
		}
	}
	t.Logf("%d signatures received before kill -9, all audited (%d records)", len(got), len(audited))
	d.stop()
}

func TestDaemonGracefulShutdown(t *testing.T) {
	work := t.TempDir()
	data := filepath.Join(work, "data")
	d := startDaemon(t, data, noRateLimit(t)...)
	// Calls that are in flight when SIGTERM arrives must complete: slow
	// ones, with a large card, started just before the signal.
	c := dialDaemon(t, d.grpc)
	big := []byte(`{"name":"Big","description":"` + strings.Repeat("long text ", 20000) + `","supportedInterfaces":[{"url":"https://a.example","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`)
	received := signLoad(t, d.grpc, 16)
	time.Sleep(time.Second)
	inflight := make(chan error, 8)
	var started sync.WaitGroup
	for range 8 {
		started.Add(1)
		go func() {
			started.Done()
			_, err := c.SignCard(t.Context(), &pb.SignCardRequest{Card: big})
			inflight <- err
		}()
	}
	started.Wait()
	time.Sleep(20 * time.Millisecond) // let the calls reach the server
	d.stop()                          // SIGTERM mid-load: exits 0 (checked by stop)
	got := received()
	ok := 0
	for range 8 {
		err := <-inflight
		switch status.Code(err) {
		case codes.OK:
			ok++
		case codes.Unavailable:
			// Never reached the server before it stopped accepting.
		default:
			t.Fatalf("a call in flight at SIGTERM failed with %v", err)
		}
	}
	if ok == 0 {
		t.Fatal("no call that was in flight at SIGTERM completed")
	}
	if !strings.Contains(d.log.String(), "finishing in-flight signatures") {
		t.Fatalf("no shutdown log:\n%s", d.log.String())
	}
	d = startDaemon(t, data)
	audited := auditedSignatures(t, work, d.grpc)
	for _, s := range got {
		if !audited[s] {
			t.Fatalf("a signature returned during shutdown has no audit record")
		}
	}
	d.stop()
}
