//go:build !cgo || nopkcs11

package main

import "github.com/cardsign/cardsign/backends"

// addPKCS11 in a build without PKCS#11 (it needs cgo): a pkcs11: key says
// what this build lacks.
func addPKCS11(reg *backends.Registry) error {
	return reg.Add("pkcs11", backends.Missing("pkcs11", "rebuild cardsign with cgo (CGO_ENABLED=1) and without -tags nopkcs11"), backends.Config{})
}
