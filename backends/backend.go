package backends

import (
	"context"
	"crypto"
	"errors"

	"github.com/cardsign/cardsign/backends/internal/kmsstats"
	"github.com/cardsign/cardsign/jose"
)

// Handle is what a backend hands back for a key URI.
type Handle struct {
	Signer crypto.Signer
	// Alg is the backend's own knowledge of the alg (a JWK "alg" member, a
	// KMS key's algorithm); "" when the key type decides.
	Alg jose.Alg
	// KID is the kid recorded with the key; "" when none is.
	KID string
}

// Backend opens keys by URI. Open must honour ctx for any I/O it does, and
// its errors must never contain key material or secrets from the URI.
type Backend interface {
	Open(ctx context.Context, uri string) (Handle, error)
}

// Creator is implemented by backends that can make new keys.
type Creator interface {
	Create(ctx context.Context, req CreateRequest) (uri string, err error)
}

// CreateRequest asks a Creator for a new key.
type CreateRequest struct {
	Alg jose.Alg
	// Name is backend-specific: a file path for "file", a key name for a KMS.
	Name string
}

// ErrUnavailable is wrapped (errors.Is) by backend errors that mean "the key
// store cannot answer now, retry later" (a token removed, a KMS throttling
// past its deadline), as opposed to a wrong key or a refused request.
var ErrUnavailable = errors.New("key backend unavailable")

// HealthChecker is implemented by backends that hold connections (HSM
// sessions): Healthy reports whether they can sign now, for readiness.
type HealthChecker interface {
	Healthy(ctx context.Context) error
}

// StatsReporter is implemented by backends that count their calls to a
// provider (the KMS backends), for /metrics.
type StatsReporter interface {
	Stats() kmsstats.Stats
}

// Disabler is implemented by backends that can switch a key off at the
// provider (a KMS key version disabled), for revocation that reaches past
// cardsign's own records.
type Disabler interface {
	Disable(ctx context.Context, uri string) error
}

// PreconditionError reports a backend that cannot do what was asked until
// an operator changes something outside cardsign (a key directory the
// daemon cannot write, a missing directory): unlike ErrUnavailable,
// retrying does not help. The daemon maps it to FAILED_PRECONDITION. Its
// message says what failed and where, why, and how to fix it; never
// secrets.
type PreconditionError struct {
	Op  string // what failed, and where: "file backend: create key in /x/keys"
	Err error  // why: the cause, e.g. fs.ErrPermission
	Fix string // how to fix it: "make the directory writable by the daemon's user"
}

func (e *PreconditionError) Error() string {
	msg := e.Op + ": " + e.Err.Error()
	if e.Fix != "" {
		msg += ": " + e.Fix
	}
	return msg
}

func (e *PreconditionError) Unwrap() error { return e.Err }
