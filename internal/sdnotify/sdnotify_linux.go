//go:build linux

// Package sdnotify speaks the service manager notification protocol of
// sd_notify(3), without libsystemd: one datagram per state change,
// KEY=VALUE lines, sent to the AF_UNIX socket named by NOTIFY_SOCKET (a
// path, or an abstract socket written @NAME). Under Type=notify systemd
// starts ordering dependent units at READY=1, holds `systemctl reload`
// between RELOADING=1 and READY=1 (Type=notify-reload, systemd 253 and
// newer), and shows STATUS= in `systemctl status`. Without NOTIFY_SOCKET
// nothing is sent; on other systems than Linux every call is a no-op.
package sdnotify

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// SocketEnv names the service manager's socket.
const SocketEnv = "NOTIFY_SOCKET"

// notifyTimeout bounds one send: a service manager that does not read its
// socket must not hold up start, reload or shutdown.
const notifyTimeout = 2 * time.Second

// FromEnv is this process's notifier, made from NOTIFY_SOCKET.
func FromEnv() *Notifier { return New(os.Getenv(SocketEnv)) }

// sdState is where the notifier is in the protocol. It keeps the messages
// in an order systemd accepts whatever the signals' timing: no reload
// before the first READY=1, no READY=1 after STOPPING=1.
type sdState int

const (
	sdStarting sdState = iota
	sdServing
	sdReloadingState
	sdStoppingState
)

// Notifier sends state changes to one notification socket. Sends are
// serialized (a reload's READY=1 never overtakes its RELOADING=1). A failed
// send is logged once, never fatal: a daemon serves the same without a
// service manager.
type Notifier struct {
	addr    string // NOTIFY_SOCKET; empty: not under a service manager
	timeout time.Duration

	mu     sync.Mutex
	state  sdState
	status string // the serving status, sent again after each reload
	warned bool   // a failed send was logged; later ones are not
}

// New is a notifier for the socket addr (NOTIFY_SOCKET's value; empty:
// not under a service manager, and nothing is sent).
func New(addr string) *Notifier {
	return &Notifier{addr: addr, timeout: notifyTimeout}
}

// Ready tells the service manager that the daemon serves, with status
// shown by `systemctl status`; only the first call sends.
func (n *Notifier) Ready(log *slog.Logger, status string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.move(sdStarting, sdServing) {
		return
	}
	n.status = oneLine(status)
	n.send(log, "READY=1\nSTATUS="+n.status+"\nMAINPID="+strconv.Itoa(os.Getpid()))
}

// Reloading tells it that a reload (SIGHUP) has begun; ignored before
// Ready and after Stopping.
func (n *Notifier) Reloading(log *slog.Logger) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.move(sdServing, sdReloadingState) {
		return
	}
	msg := "RELOADING=1\nSTATUS=reloading the TLS files (SIGHUP)"
	// MONOTONIC_USEC lets systemd tell this reload from an earlier one.
	if usec, ok := monotonicUsec(); ok {
		msg += "\nMONOTONIC_USEC=" + strconv.FormatUint(usec, 10)
	}
	n.send(log, msg)
}

// Reloaded tells it that the reload is over, whatever its outcome (a
// failed reload keeps serving the previous material, and says so in the
// log); it sends Ready's status again.
func (n *Notifier) Reloaded(log *slog.Logger) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.move(sdReloadingState, sdServing) {
		return
	}
	n.send(log, "READY=1\nSTATUS="+n.status)
}

// Stopping tells it that the drain has begun, with status; later calls
// send nothing.
func (n *Notifier) Stopping(log *slog.Logger, status string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state == sdStoppingState {
		return
	}
	n.state = sdStoppingState
	n.send(log, "STOPPING=1\nSTATUS="+oneLine(status))
}

// move changes the state from from to to, and says whether it did: each
// message belongs to one change. n.mu is held.
func (n *Notifier) move(from, to sdState) bool {
	if n.state != from {
		return false
	}
	n.state = to
	return true
}

// send writes one message; n.mu is held.
func (n *Notifier) send(log *slog.Logger, msg string) {
	if n.addr == "" {
		return
	}
	if err := n.write(msg); err != nil && !n.warned {
		n.warned = true
		log.Warn("cannot notify the service manager; serving without it (later failures are not logged)",
			"socket", n.addr, "err", err)
	}
}

func (n *Notifier) write(msg string) error {
	// systemd 254 and newer may also name a vsock address (vsock:CID:PORT),
	// for a virtual machine's manager; this package supports the two forms a
	// service's manager uses.
	if !strings.HasPrefix(n.addr, "/") && !strings.HasPrefix(n.addr, "@") {
		return fmt.Errorf("%s=%q is neither an absolute path nor an abstract socket (@NAME)", SocketEnv, n.addr)
	}
	// A leading @ is an abstract socket: the net package turns it into the
	// leading NUL byte the kernel expects.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.addr, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetWriteDeadline(time.Now().Add(n.timeout)); err != nil {
		return err
	}
	_, err = conn.Write([]byte(msg))
	return err
}

// oneLine keeps a STATUS= value on its line: a newline would start another
// assignment.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// clockMonotonic is CLOCK_MONOTONIC in the Linux ABI.
const clockMonotonic = 1

// monotonicUsec reads CLOCK_MONOTONIC, the clock of MONOTONIC_USEC, in
// microseconds. Go's time package keeps its monotonic readings relative to
// the process start, so the clock is read directly; ok is false if it
// cannot be (the field is then left out).
func monotonicUsec() (usec uint64, ok bool) {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return uint64(ts.Sec)*1e6 + uint64(ts.Nsec)/1e3, true
}
