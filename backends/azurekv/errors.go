//go:build !noazurekv

package azurekv

import (
	"errors"
	"fmt"

	"github.com/cardsign/cardsign/backends"
)

// The typed errors below are what callers branch on. They name vaults,
// keys and Key Vault's error codes; access tokens never reach them.

// KeyNotFoundError reports a key or key version the vault does not have
// (404 KeyNotFound), or one the backend's identity may not see.
type KeyNotFoundError struct {
	Key    string
	Reason string
}

func (e *KeyNotFoundError) Error() string {
	return fmt.Sprintf("azurekv: key %s not found: %s", e.Key, e.Reason)
}

// Is makes every *KeyNotFoundError match backends.ErrKeyNotFound.
func (e *KeyNotFoundError) Is(target error) bool { return target == backends.ErrKeyNotFound }

// KeyStateError reports a key version that exists but will not sign: it
// is disabled, expired or not yet valid.
type KeyStateError struct {
	Key    string
	Reason string
}

func (e *KeyStateError) Error() string {
	return fmt.Sprintf("azurekv: key %s cannot sign: %s (enable it in the vault, or rotate and revoke it)", e.Key, e.Reason)
}

// Is makes every *KeyStateError match backends.ErrKeyDisabled.
func (e *KeyStateError) Is(target error) bool { return target == backends.ErrKeyDisabled }

// UnsupportedKeyError reports a key that cannot sign a JWS cardsign makes:
// an oct key, a curve without a JOSE alg (P-256K), a key without the sign
// operation.
type UnsupportedKeyError struct {
	Key    string
	Reason string
}

func (e *UnsupportedKeyError) Error() string {
	return fmt.Sprintf("azurekv: key %s is not supported: %s", e.Key, e.Reason)
}

// DeniedError reports a request Key Vault refused with 401 or 403 (other
// than a disabled key): the identity lacks a role or access policy.
type DeniedError struct {
	Op, Key string
	Status  int
	Code    string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("azurekv: %s %s: Key Vault answered %d %q: grant the identity the data actions keys/read and keys/sign/action (keys/create/action and keys/update/action to create and disable) on the key or vault (deploy/examples/azure-key-vault.yaml)",
		e.Op, e.Key, e.Status, e.Code)
}

// HostError reports a key URI naming a vault host the configuration does
// not allow.
type HostError struct {
	Host    string
	Allowed []string
}

func (e *HostError) Error() string {
	return fmt.Sprintf("azurekv: vault host %s is not allowed (allowed: %s): add it to key_backends.azurekv.allowed_hosts",
		e.Host, backends.JoinOrNone(e.Allowed))
}

// UnavailableError reports that Key Vault could not answer in time: it
// kept throttling (429) or failing (5xx), or was unreachable, until the
// deadline; or the backend is closed. errors.Is(err,
// backends.ErrUnavailable) holds.
type UnavailableError struct {
	Op, Key  string
	Attempts int
	Err      error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("azurekv: %s %s: Key Vault unavailable after %d attempt(s): %v", e.Op, e.Key, e.Attempts, e.Err)
}
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes every *UnavailableError match backends.ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == backends.ErrUnavailable }

// ErrClosed is wrapped by every call on a closed Backend.
var ErrClosed = errors.New("backend closed")
