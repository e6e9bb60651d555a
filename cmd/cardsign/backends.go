package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/backends/pkcs11"
)

// Environment of the pkcs11: backend in the CLI, where there is no config
// file: the module(s) it may load and the user PIN.
const (
	pkcs11ModuleEnv = "CARDSIGN_PKCS11_MODULE" // one path, or several separated by ':'
	pkcs11PINEnv    = "CARDSIGN_PKCS11_PIN"
)

// keyBackends is the CLI's registry: file keys, unrestricted (the user's
// own process reading the user's files), and PKCS#11 tokens, built only when
// a pkcs11: URI is opened.
func keyBackends() (*backends.Registry, error) {
	reg := backends.NewRegistry()
	if err := reg.Add(file.Scheme, file.Constructor, backends.Config{}); err != nil {
		return nil, err
	}
	if err := addPKCS11(reg); err != nil {
		return nil, err
	}
	return reg, nil
}

// addPKCS11 adds the pkcs11: backend, built only when a key URI needs it;
// in a build without PKCS#11 (it needs cgo) a pkcs11: key says what this
// build lacks. Only modules named in CARDSIGN_PKCS11_MODULE may be loaded:
// a URI must not be able to make the CLI load an arbitrary shared library.
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
	return reg.AddBuilt("cardsign", pkcs11.Scheme, pkcs11.Constructor, pkcs11.NotBuilt, backends.Config{Settings: cfg})
}
