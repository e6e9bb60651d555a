//go:build !linux

package sdnotify

import "log/slog"

// Service manager notifications (sdnotify_linux.go) are systemd's, on
// Linux only: elsewhere they are no-ops.

// SocketEnv names the service manager's socket.
const SocketEnv = "NOTIFY_SOCKET"

// Notifier sends nothing on this system.
type Notifier struct{}

// FromEnv is this process's notifier.
func FromEnv() *Notifier { return &Notifier{} }

// New is a notifier; addr is not used on this system.
func New(addr string) *Notifier { return &Notifier{} }

// Ready does nothing on this system.
func (*Notifier) Ready(*slog.Logger, string) {}

// Reloading does nothing on this system.
func (*Notifier) Reloading(*slog.Logger) {}

// Reloaded does nothing on this system.
func (*Notifier) Reloaded(*slog.Logger) {}

// Stopping does nothing on this system.
func (*Notifier) Stopping(*slog.Logger, string) {}
