//go:build noawskms

package main

import (
	"log/slog"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/internal/daemonconfig"
)

func addAWSKMS(reg *backends.Registry, _ daemonconfig.AWSKMSConfig, _ *slog.Logger) error {
	return reg.Add("awskms", backends.Missing("awskms", awskmsNotBuilt), backends.Config{})
}

// awskmsNotBuilt says how to get the awskms backend this build lacks
// (notBuilt).
const awskmsNotBuilt = "rebuild cardsignd without -tags noawskms"
