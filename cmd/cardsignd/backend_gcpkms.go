//go:build !nogcpkms

package main

import (
	"log/slog"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/gcpkms"
	"github.com/cardsign/cardsign/internal/daemonconfig"
)

func addGCPKMS(reg *backends.Registry, c daemonconfig.GCPKMSConfig, log *slog.Logger) error {
	log.Info("gcpkms backend configured", "endpoint", c.Endpoint, "crypto_key", c.CryptoKey)
	return reg.Add(gcpkms.Scheme, gcpkms.Constructor, backends.Config{Settings: gcpkms.Config{
		Endpoint: c.Endpoint, Insecure: c.Insecure, CryptoKey: c.CryptoKey, RateLimit: c.RateLimit, Logger: log}})
}

// gcpkmsNotBuilt is empty: this build has the gcpkms backend (notBuilt).
const gcpkmsNotBuilt = ""
