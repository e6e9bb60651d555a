package main

import (
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/file"
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
