package httpapi

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
)

// acceptAll accepts from l until it is closed, keeping the connections.
func acceptAll(t *testing.T, l net.Listener) chan net.Conn {
	t.Helper()
	out := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(out)
				return
			}
			out <- c
		}
	}()
	return out
}

func dialFrom(t *testing.T, local, addr string) (net.Conn, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// refused reports whether the listener closed the connection at once.
func refused(t *testing.T, local, addr string) bool {
	t.Helper()
	c, err := dialFrom(t, local, addr)
	if err != nil {
		return errors.Is(err, syscall.ECONNRESET)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 1))
	return n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
}

func TestLimitListener(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs testsupport.SyncBuffer
	l := LimitListener(raw, "test", ConnLimits{Max: 2, MaxPerIP: 1}, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	defer l.Close()
	accepted := acceptAll(t, l)
	addr := raw.Addr().String()

	if _, err := dialFrom(t, "127.0.0.1", addr); err != nil {
		t.Fatal(err)
	}
	first := <-accepted
	if !refused(t, "127.0.0.1", addr) {
		t.Fatal("a second connection from 127.0.0.1 (per IP 1) was accepted")
	}
	if _, err := dialFrom(t, "127.0.0.2", addr); err != nil {
		t.Fatal(err)
	}
	<-accepted
	if !refused(t, "127.0.0.3", addr) {
		t.Fatal("a third connection (max 2) was accepted")
	}
	// Closing (twice: servers do) gives exactly one slot back.
	first.Close()
	first.Close()
	if _, err := dialFrom(t, "127.0.0.1", addr); err != nil {
		t.Fatal(err)
	}
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a connection after a slot was freed was not accepted")
	}
	if !refused(t, "127.0.0.4", addr) {
		t.Fatal("a slot was given back twice")
	}
	if !strings.Contains(logs.String(), "connection refused") {
		t.Fatalf("refusals not logged:\n%s", logs.String())
	}
}

func TestRefusalLogSummarizes(t *testing.T) {
	var logs testsupport.SyncBuffer
	r := NewRefusalLog(slog.New(slog.NewTextHandler(&logs, nil)), 3, time.Second)
	for range 100 {
		r.Log(t.Context(), slog.LevelInfo, "Unauthenticated", "rpc", "code", "Unauthenticated")
		r.Log(t.Context(), slog.LevelInfo, "PermissionDenied", "rpc", "code", "PermissionDenied")
	}
	// Both reasons have their own budget; the summaries follow the interval.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "reason=PermissionDenied") || !strings.Contains(logs.String(), "reason=Unauthenticated") {
		if time.Now().After(deadline) {
			t.Fatalf("no summaries:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	out := logs.String()
	if n := strings.Count(out, "msg=rpc"); n > 12 {
		t.Errorf("%d individual lines for 200 refusals, want at most 3 per reason per interval:\n%s", n, out)
	}
	if !strings.Contains(out, "more refusals in the last 1s") {
		t.Errorf("summary line missing:\n%s", out)
	}
}
