//go:build linux

package sdnotify_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/sdnotify"
	"github.com/cardsign/cardsign/internal/sdnotify/sdnotifytest"
)

// TestNotifyProtocol drives the notifier in process through start, two
// reloads and shutdown, and checks the order rules: no reload before READY=1
// or after STOPPING=1, one READY=1 at start however often it is asked.
func TestNotifyProtocol(t *testing.T) {
	for _, abstract := range []bool{false, true} {
		t.Run(map[bool]string{false: "path", true: "abstract"}[abstract], func(t *testing.T) {
			sock := sdnotifytest.Listen(t, abstract)
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			n := sdnotify.New(sock.Addr)

			n.Reloading(log) // SIGHUP during start: nothing to tell yet
			n.Reloaded(log)
			sock.None(50 * time.Millisecond)

			n.Ready(log, "serving\ngRPC")
			f := sdnotifytest.Fields(t, sock.Next())
			if f["READY"] != "1" || f["STATUS"] != "serving gRPC" || f["MAINPID"] != strconv.Itoa(os.Getpid()) {
				t.Fatalf("READY message: %q", f)
			}
			n.Ready(log, "again")
			sock.None(50 * time.Millisecond)

			for range 2 {
				before := sdnotifytest.Monotonic(t)
				n.Reloading(log)
				f = sdnotifytest.Fields(t, sock.Next())
				sdnotifytest.ExpectReload(t, f, before, sdnotifytest.Monotonic(t))
				n.Reloaded(log)
				if f = sdnotifytest.Fields(t, sock.Next()); f["READY"] != "1" || f["STATUS"] != "serving gRPC" {
					t.Fatalf("after the reload: %q", f)
				}
			}

			n.Stopping(log, "stopping")
			if f = sdnotifytest.Fields(t, sock.Next()); f["STOPPING"] != "1" || f["STATUS"] == "" {
				t.Fatalf("STOPPING message: %q", f)
			}
			n.Reloading(log)
			n.Reloaded(log)
			n.Stopping(log, "stopping")
			sock.None(50 * time.Millisecond)
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
		n := sdnotify.New(addr)
		n.Ready(log, "serving")
		n.Reloading(log)
		n.Reloaded(log)
		n.Stopping(log, "stopping")
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
	n := sdnotify.New("")
	n.Ready(log, "serving")
	n.Stopping(log, "stopping")
	if logs.Len() != 0 {
		t.Fatalf("logged without NOTIFY_SOCKET: %s", logs.String())
	}
}
