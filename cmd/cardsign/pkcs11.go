//go:build cgo && !nopkcs11

package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/pkcs11"
)

// addPKCS11 adds the pkcs11: backend, built only when a key URI needs it.
// Only modules named in CARDSIGN_PKCS11_MODULE may be loaded: a URI must not
// be able to make the CLI load an arbitrary shared library.
func addPKCS11(reg *backends.Registry) error {
	var modules []string
	for _, m := range strings.Split(os.Getenv(pkcs11ModuleEnv), ":") {
		if m != "" && filepath.IsAbs(m) {
			modules = append(modules, m)
		}
	}
	// pin-source may name any file here: the CLI reads with its user's
	// own rights, so there is no one to guard the file from (cardsignd
	// restricts it to pkcs11.pin_source_dirs).
	cfg := pkcs11.Config{AllowedModules: modules, PIN: os.Getenv(pkcs11PINEnv), PINSourceDirs: []string{"/"}, ModuleSetting: pkcs11ModuleEnv}
	if len(modules) > 0 {
		cfg.DefaultModule = modules[0]
	}
	return reg.Add(pkcs11.Scheme, pkcs11.Constructor, backends.Config{Settings: cfg})
}
