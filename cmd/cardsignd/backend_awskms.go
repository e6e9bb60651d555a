//go:build !noawskms

package main

import (
	"log/slog"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/awskms"
	"github.com/cardsign/cardsign/internal/daemonconfig"
)

func addAWSKMS(reg *backends.Registry, c daemonconfig.AWSKMSConfig, log *slog.Logger) error {
	log.Info("awskms backend configured", "endpoint", c.Endpoint, "region", c.Region)
	return reg.Add(awskms.Scheme, awskms.Constructor, backends.Config{Settings: awskms.Config{
		Endpoint: c.Endpoint, Region: c.Region, KeySpec: c.KeySpec, Alias: c.Alias, RateLimit: c.RateLimit, Logger: log}})
}

// awskmsNotBuilt is empty: this build has the awskms backend (notBuilt).
const awskmsNotBuilt = ""
