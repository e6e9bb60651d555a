//go:build novault

package hashivault

import (
	"context"

	"github.com/cardsign/cardsign/backends"
)

// NotBuilt says how to get the hashivault backend, which this build lacks:
// a binary reports it as "rebuild BINARY without -tags novault".
const NotBuilt = "without -tags novault"

// Constructor, in a build without the hashivault backend, fails with a
// *backends.NotBuiltError saying how to get it, so a key URI or a config
// section naming hashivault: says what this build lacks instead of
// "unknown scheme".
func Constructor(context.Context, backends.Config) (backends.Backend, error) {
	return nil, &backends.NotBuiltError{Scheme: Scheme, How: "rebuild " + NotBuilt}
}
