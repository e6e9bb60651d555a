//go:build noazurekv

package azurekv

import (
	"context"

	"github.com/cardsign/cardsign/backends"
)

// tokenCredential stands for azcore.TokenCredential (config.go) in a build
// without the backend: Config.TokenCredential is then of no use, and the
// Azure SDK stays out.
type tokenCredential = any

// NotBuilt says how to get the azurekv backend, which this build lacks: a
// binary reports it as "rebuild BINARY without -tags noazurekv".
const NotBuilt = "without -tags noazurekv"

// Constructor, in a build without the azurekv backend, fails with a
// *backends.NotBuiltError saying how to get it, so a key URI or a config
// section naming azurekv: says what this build lacks instead of "unknown
// scheme".
func Constructor(context.Context, backends.Config) (backends.Backend, error) {
	return nil, &backends.NotBuiltError{Scheme: Scheme, How: "rebuild " + NotBuilt}
}
