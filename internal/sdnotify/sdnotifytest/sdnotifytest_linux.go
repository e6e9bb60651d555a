//go:build linux

package sdnotifytest

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// Socket is a service manager's end of NOTIFY_SOCKET: a real unixgram
// socket, at a path or abstract.
type Socket struct {
	t    testing.TB
	Addr string // what NOTIFY_SOCKET says
	conn *net.UnixConn
}

// Listen opens a socket in t's temporary directory, or an abstract one,
// closed when t ends.
func Listen(t testing.TB, abstract bool) *Socket {
	t.Helper()
	addr := filepath.Join(t.TempDir(), "notify")
	if abstract {
		b := make([]byte, 8)
		rand.Read(b)
		addr = "@cardsignd-test-" + hex.EncodeToString(b)
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &Socket{t: t, Addr: addr, conn: conn}
}

// Next returns the next message as its assignments, in order.
func (s *Socket) Next() []string {
	s.t.Helper()
	buf := make([]byte, 4096)
	s.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	n, err := s.conn.Read(buf)
	if err != nil {
		s.t.Fatalf("no notification: %v", err)
	}
	return strings.Split(string(buf[:n]), "\n")
}

// None fails if a message arrives within d.
func (s *Socket) None(d time.Duration) {
	s.t.Helper()
	buf := make([]byte, 4096)
	s.conn.SetReadDeadline(time.Now().Add(d))
	if n, err := s.conn.Read(buf); err == nil {
		s.t.Fatalf("unexpected notification %q", buf[:n])
	}
}

// Fields maps a message's assignments, and fails on a repeated or
// malformed one.
func Fields(t testing.TB, msg []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range msg {
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			t.Fatalf("malformed assignment %q in %q", line, msg)
		}
		if _, dup := out[k]; dup {
			t.Fatalf("%s twice in %q", k, msg)
		}
		out[k] = v
	}
	return out
}

// Monotonic reads CLOCK_MONOTONIC (1 in <linux/time.h>) in
// microseconds on its own, so that the clock the notifier reads is checked
// against this one, not against itself.
func Monotonic(t testing.TB) uint64 {
	t.Helper()
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		t.Fatalf("clock_gettime(CLOCK_MONOTONIC): %v", errno)
	}
	return uint64(ts.Sec)*1e6 + uint64(ts.Nsec)/1e3
}

// ExpectReload checks a RELOADING=1 message: its MONOTONIC_USEC must lie
// between the test's own readings of CLOCK_MONOTONIC taken before the
// reload was asked for and after the message arrived.
func ExpectReload(t testing.TB, f map[string]string, before, after uint64) {
	t.Helper()
	if f["RELOADING"] != "1" {
		t.Fatalf("want RELOADING=1, got %q", f)
	}
	usec, err := strconv.ParseUint(f["MONOTONIC_USEC"], 10, 64)
	if err != nil {
		t.Fatalf("MONOTONIC_USEC: %v in %q", err, f)
	}
	if usec < before || usec > after {
		t.Fatalf("MONOTONIC_USEC=%d is not CLOCK_MONOTONIC: outside [%d, %d]", usec, before, after)
	}
}
