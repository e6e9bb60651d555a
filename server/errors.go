package server

import (
	"errors"

	"github.com/cardsign/cardsign/policy"
)

// The errors the authority returns that a caller can act on: the API
// packages (server/grpcapi, the HTTP handlers) map each to its status.

// InvalidArgumentError is a request field that cannot be used.
type InvalidArgumentError struct{ Field, Reason string }

func (e *InvalidArgumentError) Error() string { return e.Field + ": " + e.Reason }

// PreconditionError is a key operation the key's state does not allow.
type PreconditionError struct{ Reason string }

func (e *PreconditionError) Error() string { return e.Reason }

// UnavailableError is a dependency (the store, a key backend) that cannot
// answer now; the caller may retry.
type UnavailableError struct {
	What string
	Err  error
}

func (e *UnavailableError) Error() string { return e.What + " unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// NotFoundError is an unknown kid.
type NotFoundError struct{ KID string }

func (e *NotFoundError) Error() string { return "no key with kid " + e.KID }

// ErrNoActiveKey means signing has stopped until a key is activated.
var ErrNoActiveKey = errors.New("no active signing key: rotate or activate a key (the last active key was revoked or retired)")

// KeyChangedError reports a key whose backend now returns another public
// key than the one recorded (and published) when the key was created or
// imported: the key file or backend key was replaced. Signing with it would
// publish signatures no verifier accepts, so it is refused; an operator
// must restore the key or rotate. It maps to FAILED_PRECONDITION.
type KeyChangedError struct{ KID string }

func (e *KeyChangedError) Error() string {
	return "key " + e.KID + ": the backend's public key is not the one on record; the key was replaced at its backend: restore the original key, or rotate to a new key and revoke " + e.KID
}

// KeyUnavailableError is a key on record and due to sign that this process
// cannot open: whatever the backend's reason (a key file missing here, a
// KMS outage), it maps to UNAVAILABLE, so that a client of several replicas
// tries another, which may have the key; the message says which key and
// why, and /readyz says this replica is not ready.
type KeyUnavailableError struct {
	KID string
	Err error
}

func (e *KeyUnavailableError) Error() string {
	return "signing key " + e.KID + " cannot be opened here: " + e.Err.Error()
}

func (e *KeyUnavailableError) Unwrap() error { return e.Err }

// ErrDraining: the daemon is shutting down.
var ErrDraining = errors.New("shutting down")

// ErrNotChecked: no readiness check has finished yet.
var ErrNotChecked = errors.New("readiness not checked yet")

// ErrAudit wraps a failure to commit audit records: the signature was made
// and then discarded.
var ErrAudit = errors.New("audit record not committed; the signature was discarded")

// RefusedError is a card the signing policy refused; the refusal is in the
// audit log as record Seq.
type RefusedError struct {
	Refusal *policy.Refusal
	Seq     int64
	// AuditErr is set when the refusal could not be recorded: the card
	// is refused all the same.
	AuditErr error
}

func (e *RefusedError) Error() string { return e.Refusal.Error() }
func (e *RefusedError) Unwrap() error { return e.Refusal }
