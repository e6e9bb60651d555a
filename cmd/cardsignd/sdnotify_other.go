//go:build !linux

package main

import (
	"log/slog"
	"net"
)

// Service manager notifications (sdnotify.go) are systemd's, on Linux
// only: elsewhere they are no-ops.

type sdNotifier struct{}

func serviceNotifier() *sdNotifier { return &sdNotifier{} }

func (*sdNotifier) notifyReady(*slog.Logger, net.Addr, net.Addr) {}
func (*sdNotifier) notifyReloading(*slog.Logger)                 {}
func (*sdNotifier) notifyReloaded(*slog.Logger)                  {}
func (*sdNotifier) notifyStopping(*slog.Logger)                  {}
