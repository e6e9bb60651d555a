package server

import (
	"context"

	"github.com/cardsign/cardsign/access"
)

// Call is who makes a request and under which id, as the API layer
// (server/grpcapi) learned it: administrative audit records and log lines
// name them.
type Call struct {
	RequestID string
	Caller    string          // the authenticated name; empty: not authenticated (yet)
	Identity  access.Identity // the caller's identity, with its provenance
}

type callKey struct{}

// WithCall returns ctx carrying c.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallOf is the call ctx carries (the zero Call outside one).
func CallOf(ctx context.Context) Call {
	c, _ := ctx.Value(callKey{}).(Call)
	return c
}
