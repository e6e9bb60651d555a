//go:build noawskms

package awskms

import (
	"context"

	"github.com/cardsign/cardsign/backends"
)

// sdkConfig stands for aws.Config (config.go) in a build without the
// backend: Config.AWSConfig is then of no use, and the SDK stays out.
type sdkConfig = struct{}

// NotBuilt says how to get the awskms backend, which this build lacks: a
// binary reports it as "rebuild BINARY without -tags noawskms".
const NotBuilt = "without -tags noawskms"

// Constructor, in a build without the awskms backend, fails with a
// *backends.NotBuiltError saying how to get it, so a key URI or a config
// section naming awskms: says what this build lacks instead of "unknown
// scheme".
func Constructor(context.Context, backends.Config) (backends.Backend, error) {
	return nil, &backends.NotBuiltError{Scheme: Scheme, How: "rebuild " + NotBuilt}
}
