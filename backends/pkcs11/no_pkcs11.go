//go:build !cgo || nopkcs11

package pkcs11

import (
	"context"

	"github.com/cardsign/cardsign/backends"
)

// NotBuilt says how to get the pkcs11 backend, which this build lacks: a
// binary reports it as "rebuild BINARY with cgo (CGO_ENABLED=1) and without -tags nopkcs11".
const NotBuilt = "with cgo (CGO_ENABLED=1) and without -tags nopkcs11"

// Constructor, in a build without the pkcs11 backend, fails with a
// *backends.NotBuiltError saying how to get it, so a key URI or a config
// section naming pkcs11: says what this build lacks instead of "unknown
// scheme".
func Constructor(context.Context, backends.Config) (backends.Backend, error) {
	return nil, &backends.NotBuiltError{Scheme: Scheme, How: "rebuild " + NotBuilt}
}
