//go:build nogcpkms

package main

import (
	"log/slog"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/internal/daemonconfig"
)

func addGCPKMS(reg *backends.Registry, _ daemonconfig.GCPKMSConfig, _ *slog.Logger) error {
	return reg.Add("gcpkms", backends.Missing("gcpkms", gcpkmsNotBuilt), backends.Config{})
}

// gcpkmsNotBuilt says how to get the gcpkms backend this build lacks
// (notBuilt).
const gcpkmsNotBuilt = "rebuild cardsignd without -tags nogcpkms"
