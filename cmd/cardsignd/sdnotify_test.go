//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/sdnotify"
	"github.com/cardsign/cardsign/internal/sdnotify/sdnotifytest"
)

// notifyEnv is this process's environment with NOTIFY_SOCKET set to addr
// (and no NOTIFY_SOCKET the test itself may have inherited).
func notifyEnv(addr string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, sdnotify.SocketEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(env, sdnotify.SocketEnv+"="+addr)
}

// TestDaemonNotify runs the real cardsignd with NOTIFY_SOCKET, as systemd
// would with Type=notify: READY=1 with its addresses and PID once it
// serves, RELOADING=1 and READY=1 around a SIGHUP, STOPPING=1 on SIGTERM,
// then exit 0.
func TestDaemonNotify(t *testing.T) {
	for _, abstract := range []bool{false, true} {
		t.Run(map[bool]string{false: "path", true: "abstract"}[abstract], func(t *testing.T) {
			sock := sdnotifytest.Listen(t, abstract)
			d := startDaemonEnv(t, notifyEnv(sock.Addr), filepath.Join(t.TempDir(), "data"))

			f := sdnotifytest.Fields(t, sock.Next())
			if f["READY"] != "1" || f["MAINPID"] != strconv.Itoa(d.cmd.Process.Pid) {
				t.Fatalf("first message %q: want READY=1 and MAINPID=%d", f, d.cmd.Process.Pid)
			}
			status := f["STATUS"]
			if !strings.Contains(status, d.grpc) || !strings.Contains(status, d.http) {
				t.Fatalf("STATUS=%q does not say where it serves (gRPC %s, HTTP %s)", status, d.grpc, d.http)
			}

			before := sdnotifytest.Monotonic(t)
			d.cmd.Process.Signal(syscall.SIGHUP)
			f = sdnotifytest.Fields(t, sock.Next())
			sdnotifytest.ExpectReload(t, f, before, sdnotifytest.Monotonic(t))
			if f = sdnotifytest.Fields(t, sock.Next()); f["READY"] != "1" || f["STATUS"] != status {
				t.Fatalf("after the reload: %q, want READY=1 and STATUS=%q", f, status)
			}
			resp, _ := httpGet(t, "http://"+d.http+"/healthz")
			if resp.StatusCode != 200 {
				t.Fatalf("/healthz after SIGHUP: %s", resp.Status)
			}

			d.cmd.Process.Signal(syscall.SIGTERM)
			if f = sdnotifytest.Fields(t, sock.Next()); f["STOPPING"] != "1" {
				t.Fatalf("on SIGTERM: %q, want STOPPING=1", f)
			}
			d.stop() // exit 0
			sock.None(100 * time.Millisecond)
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
