//go:build linux

package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// notifySocket is a service manager's end of NOTIFY_SOCKET: a real
// unixgram socket, at a path or abstract.
type notifySocket struct {
	t    testing.TB
	addr string // what NOTIFY_SOCKET says
	conn *net.UnixConn
}

func listenNotify(t testing.TB, abstract bool) *notifySocket {
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
	return &notifySocket{t: t, addr: addr, conn: conn}
}

// next returns the next message as its assignments, in order.
func (s *notifySocket) next() []string {
	s.t.Helper()
	buf := make([]byte, 4096)
	s.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	n, err := s.conn.Read(buf)
	if err != nil {
		s.t.Fatalf("no notification: %v", err)
	}
	return strings.Split(string(buf[:n]), "\n")
}

// none fails if a message arrives within d.
func (s *notifySocket) none(d time.Duration) {
	s.t.Helper()
	buf := make([]byte, 4096)
	s.conn.SetReadDeadline(time.Now().Add(d))
	if n, err := s.conn.Read(buf); err == nil {
		s.t.Fatalf("unexpected notification %q", buf[:n])
	}
}

// fields maps a message's assignments, and fails on a repeated or
// malformed one.
func fields(t testing.TB, msg []string) map[string]string {
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

// mustMonotonic reads CLOCK_MONOTONIC (1 in <linux/time.h>) in
// microseconds on its own, so that the clock the notifier reads is checked
// against this one, not against itself.
func mustMonotonic(t testing.TB) uint64 {
	t.Helper()
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		t.Fatalf("clock_gettime(CLOCK_MONOTONIC): %v", errno)
	}
	return uint64(ts.Sec)*1e6 + uint64(ts.Nsec)/1e3
}

// expectReload checks a RELOADING=1 message: its MONOTONIC_USEC must lie
// between the test's own readings of CLOCK_MONOTONIC taken before the
// reload was asked for and after the message arrived.
func expectReload(t testing.TB, f map[string]string, before, after uint64) {
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

// TestNotifyProtocol drives the notifier in process through start, two
// reloads and shutdown, and checks the order rules: no reload before READY=1
// or after STOPPING=1, one READY=1 at start however often it is asked.
func TestNotifyProtocol(t *testing.T) {
	for _, abstract := range []bool{false, true} {
		t.Run(map[bool]string{false: "path", true: "abstract"}[abstract], func(t *testing.T) {
			sock := listenNotify(t, abstract)
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			n := newSDNotifier(sock.addr)

			n.reloading(log) // SIGHUP during start: nothing to tell yet
			n.reloaded(log)
			sock.none(50 * time.Millisecond)

			n.ready(log, "serving\ngRPC")
			f := fields(t, sock.next())
			if f["READY"] != "1" || f["STATUS"] != "serving gRPC" || f["MAINPID"] != strconv.Itoa(os.Getpid()) {
				t.Fatalf("READY message: %q", f)
			}
			n.ready(log, "again")
			sock.none(50 * time.Millisecond)

			for range 2 {
				before := mustMonotonic(t)
				n.reloading(log)
				f = fields(t, sock.next())
				expectReload(t, f, before, mustMonotonic(t))
				n.reloaded(log)
				if f = fields(t, sock.next()); f["READY"] != "1" || f["STATUS"] != "serving gRPC" {
					t.Fatalf("after the reload: %q", f)
				}
			}

			n.stopping(log)
			if f = fields(t, sock.next()); f["STOPPING"] != "1" || f["STATUS"] == "" {
				t.Fatalf("STOPPING message: %q", f)
			}
			n.reloading(log)
			n.reloaded(log)
			n.stopping(log)
			sock.none(50 * time.Millisecond)
			if logs.Len() != 0 {
				t.Fatalf("logged: %s", logs.String())
			}
		})
	}
}

// TestNotifyFailureLoggedOnce: a socket nobody listens on, or a
// NOTIFY_SOCKET of a kind cardsignd does not speak, is one warning, not an
// error and not a warning per message.
func TestNotifyFailureLoggedOnce(t *testing.T) {
	for _, addr := range []string{filepath.Join(t.TempDir(), "absent"), "vsock:2:1234", "relative/path"} {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		n := newSDNotifier(addr)
		n.ready(log, "serving")
		n.reloading(log)
		n.reloaded(log)
		n.stopping(log)
		if got := strings.Count(logs.String(), "cannot notify the service manager"); got != 1 {
			t.Fatalf("NOTIFY_SOCKET=%s: %d warnings, want 1:\n%s", addr, got, logs.String())
		}
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), addr) {
			t.Fatalf("NOTIFY_SOCKET=%s: the warning should name the socket:\n%s", addr, logs.String())
		}
	}
	// Without NOTIFY_SOCKET: silence.
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	n := newSDNotifier("")
	n.ready(log, "serving")
	n.stopping(log)
	if logs.Len() != 0 {
		t.Fatalf("logged without NOTIFY_SOCKET: %s", logs.String())
	}
}

// notifyEnv is this process's environment with NOTIFY_SOCKET set to addr
// (and no NOTIFY_SOCKET the test itself may have inherited).
func notifyEnv(addr string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, notifySocketEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(env, notifySocketEnv+"="+addr)
}

// TestDaemonNotify runs the real cardsignd with NOTIFY_SOCKET, as systemd
// would with Type=notify: READY=1 with its addresses and PID once it
// serves, RELOADING=1 and READY=1 around a SIGHUP, STOPPING=1 on SIGTERM,
// then exit 0.
func TestDaemonNotify(t *testing.T) {
	for _, abstract := range []bool{false, true} {
		t.Run(map[bool]string{false: "path", true: "abstract"}[abstract], func(t *testing.T) {
			sock := listenNotify(t, abstract)
			d := startDaemonEnv(t, notifyEnv(sock.addr), filepath.Join(t.TempDir(), "data"))

			f := fields(t, sock.next())
			if f["READY"] != "1" || f["MAINPID"] != strconv.Itoa(d.cmd.Process.Pid) {
				t.Fatalf("first message %q: want READY=1 and MAINPID=%d", f, d.cmd.Process.Pid)
			}
			status := f["STATUS"]
			if !strings.Contains(status, d.grpc) || !strings.Contains(status, d.http) {
				t.Fatalf("STATUS=%q does not say where it serves (gRPC %s, HTTP %s)", status, d.grpc, d.http)
			}

			before := mustMonotonic(t)
			d.cmd.Process.Signal(syscall.SIGHUP)
			f = fields(t, sock.next())
			expectReload(t, f, before, mustMonotonic(t))
			if f = fields(t, sock.next()); f["READY"] != "1" || f["STATUS"] != status {
				t.Fatalf("after the reload: %q, want READY=1 and STATUS=%q", f, status)
			}
			resp, _ := httpGet(t, "http://"+d.http+"/healthz")
			if resp.StatusCode != 200 {
				t.Fatalf("/healthz after SIGHUP: %s", resp.Status)
			}

			d.cmd.Process.Signal(syscall.SIGTERM)
			if f = fields(t, sock.next()); f["STOPPING"] != "1" {
				t.Fatalf("on SIGTERM: %q, want STOPPING=1", f)
			}
			d.stop() // exit 0
			sock.none(100 * time.Millisecond)
			if strings.Contains(d.log.String(), "cannot notify") {
				t.Fatalf("a notification failed:\n%s", d.log.String())
			}
		})
	}
}

// TestDaemonNotifyUnreachable: a NOTIFY_SOCKET nobody listens on costs one
// warning; cardsignd serves, reloads and stops cleanly all the same.
func TestDaemonNotifyUnreachable(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "nobody")
	d := startDaemonEnv(t, notifyEnv(addr), filepath.Join(t.TempDir(), "data"))
	d.cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(d.log.String(), "SIGHUP: TLS is off"); {
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP not handled within 10s:\n%s", d.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, _ := httpGet(t, "http://"+d.http+"/healthz")
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %s", resp.Status)
	}
	d.stop()
	if got := strings.Count(d.log.String(), "cannot notify the service manager"); got != 1 {
		t.Fatalf("%d warnings about the notification socket, want 1:\n%s", got, d.log.String())
	}
}
