//go:build cgo && !nopkcs11

package main

import (
	"log/slog"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/pkcs11"
	"github.com/cardsign/cardsign/internal/daemonconfig"
)

// addPKCS11 adds the pkcs11: backend. The PIN comes from pin_file or the
// environment, never from the config file.
func addPKCS11(reg *backends.Registry, c daemonconfig.PKCS11Config, log *slog.Logger) error {
	pin, err := c.PIN()
	if err != nil {
		return err
	}
	log.Info("pkcs11 backend configured", "module", c.Module, "token", c.Token)
	return reg.Add(pkcs11.Scheme, pkcs11.Constructor, backends.Config{Settings: pkcs11.Config{
		AllowedModules: c.Modules(), DefaultModule: c.Module, PIN: pin, Token: c.Token, PoolSize: c.PoolSize,
		PINSourceDirs: c.PINSourceDirs, Logger: log, ModuleSetting: "pkcs11.allowed_modules"}})
}

// pkcs11NotBuilt is empty: this build has the pkcs11 backend (notBuilt).
const pkcs11NotBuilt = ""
