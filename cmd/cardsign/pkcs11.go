package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/pkcs11"
)

// Environment of the pkcs11: backend in the CLI, where there is no config
// file: the module(s) it may load and the user PIN.
const (
	pkcs11ModuleEnv = "CARDSIGN_PKCS11_MODULE" // one path, or several separated by ':'
	pkcs11PINEnv    = "CARDSIGN_PKCS11_PIN"
)

var registerPKCS11 sync.Once // the registry is process-wide; register once

// usePKCS11 registers the pkcs11: backend when a key URI needs it. Only
// modules named in CARDSIGN_PKCS11_MODULE may be loaded: a URI must not be
// able to make the CLI load an arbitrary shared library.
func usePKCS11(uris []string) error {
	need := false
	for _, u := range uris {
		need = need || strings.HasPrefix(u, pkcs11.Scheme+":")
	}
	if !need {
		return nil
	}
	var err error
	registerPKCS11.Do(func() {
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
		var b *pkcs11.Backend
		if b, err = pkcs11.New(cfg); err == nil {
			backends.Register(pkcs11.Scheme, b)
		}
	})
	return err
}
