//go:build !cgo || nopkcs11

package main

import (
	"log/slog"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/internal/daemonconfig"
)

// addPKCS11 in a build without PKCS#11 (it needs cgo): a pkcs11 section or a
// pkcs11: key says what this build lacks.
func addPKCS11(reg *backends.Registry, _ daemonconfig.PKCS11Config, _ *slog.Logger) error {
	return reg.Add("pkcs11", backends.Missing("pkcs11", pkcs11NotBuilt), backends.Config{})
}

// pkcs11NotBuilt says how to get the pkcs11 backend this build lacks
// (notBuilt).
const pkcs11NotBuilt = "rebuild cardsignd with cgo (CGO_ENABLED=1) and without -tags nopkcs11"
