//go:build nogcpkms

package gcpkms

import (
	"context"

	"github.com/cardsign/cardsign/backends"
)

// clientOption stands for option.ClientOption (config.go) in a build
// without the backend: Config.ClientOptions is then of no use, and the
// Google API client stays out.
type clientOption = any

// NotBuilt says how to get the gcpkms backend, which this build lacks: a
// binary reports it as "rebuild BINARY without -tags nogcpkms".
const NotBuilt = "without -tags nogcpkms"

// Constructor, in a build without the gcpkms backend, fails with a
// *backends.NotBuiltError saying how to get it, so a key URI or a config
// section naming gcpkms: says what this build lacks instead of "unknown
// scheme".
func Constructor(context.Context, backends.Config) (backends.Backend, error) {
	return nil, &backends.NotBuiltError{Scheme: Scheme, How: "rebuild " + NotBuilt}
}
