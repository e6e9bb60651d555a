//go:build !linux

package main

import (
	"log/slog"
	"net"
)

// Service manager notifications (sdnotify.go) are systemd's, on Linux
// only: elsewhere they are no-ops.

func sdReady(*slog.Logger, net.Addr, net.Addr) {}
func sdReloading(*slog.Logger)                 {}
func sdReloaded(*slog.Logger)                  {}
func sdStopping(*slog.Logger)                  {}
