//go:build cgo && !nopkcs11

package pkcs11

import (
	"errors"
	"fmt"

	"github.com/cardsign/cardsign/backends"
)

// The typed errors below are what callers branch on: the daemon maps
// *UnavailableError to gRPC UNAVAILABLE and /readyz failures, and the CLI turns
// the others into advice. None of them ever carries a PIN: they name modules,
// tokens and keys only.

// ModuleNotAllowedError reports a module-path that is not in
// Config.AllowedModules (or is not Config.DefaultModule). Loading a PKCS#11
// module runs its code in this process, so the list is a security boundary.
type ModuleNotAllowedError struct {
	Path    string
	Allowed []string
	// Setting is Config.ModuleSetting: where the user adds a module, so
	// that the message says what to change. Empty: "the allowed modules".
	Setting string
}

func (e *ModuleNotAllowedError) Error() string {
	allowed := backends.JoinOrNone(e.Allowed)
	setting := "the allowed modules"
	if e.Setting != "" {
		setting = e.Setting
	}
	return fmt.Sprintf("pkcs11: module %s is not allowed (allowed: %s); add it to %s to use it", e.Path, allowed, setting)
}

// ModuleError reports a module that cannot be used: missing file, not a
// PKCS#11 library, or C_Initialize failing. Err is fs.ErrNotExist (via
// errors.Is) for a missing file.
type ModuleError struct {
	Path string
	Err  error
}

func (e *ModuleError) Error() string { return fmt.Sprintf("pkcs11: module %s: %v", e.Path, e.Err) }
func (e *ModuleError) Unwrap() error { return e.Err }

// TokenNotFoundError reports that no initialized token matches the URI.
// Present lists the tokens that were seen, because the usual cause is a
// misspelt label.
type TokenNotFoundError struct {
	Module  string
	Want    string // the token attributes of the URI, e.g. `token="signing"`
	Present []string
}

func (e *TokenNotFoundError) Error() string {
	return fmt.Sprintf("pkcs11: no token matching %s in module %s (present: %s)", e.Want, e.Module, backends.JoinOrNone(e.Present))
}

// PINError reports a PIN the token refused (wrong, locked, expired) or a
// missing PIN. Code is the PKCS#11 return value, 0 when the token was not
// asked. It never contains the PIN.
type PINError struct {
	Token  string
	Reason string
	Code   error // a pkcs11.Error such as CKR_PIN_INCORRECT, or nil
}

func (e *PINError) Error() string {
	return fmt.Sprintf("pkcs11: token %s: PIN %s", e.Token, e.Reason)
}
func (e *PINError) Unwrap() error { return e.Code }

// KeyNotFoundError reports that the URI matches no private key, or that the
// key has no public key object to read the public key from.
type KeyNotFoundError struct {
	Token  string
	Key    string // object / id of the URI
	Reason string
}

func (e *KeyNotFoundError) Error() string {
	return fmt.Sprintf("pkcs11: token %s: key %s: %s", e.Token, e.Key, e.Reason)
}

// Is makes every *KeyNotFoundError match backends.ErrKeyNotFound.
func (e *KeyNotFoundError) Is(target error) bool { return target == backends.ErrKeyNotFound }

// UnsupportedKeyError reports a key that exists but cannot sign any JOSE alg
// cardsign supports: DSA, secp256k1, Ed448, RSA under 2048 bits, a key
// without CKA_SIGN, and so on.
type UnsupportedKeyError struct {
	Token  string
	Key    string
	Reason string
}

func (e *UnsupportedKeyError) Error() string {
	return fmt.Sprintf("pkcs11: token %s: key %s is not supported: %s", e.Token, e.Key, e.Reason)
}

// UnavailableError reports a token that cannot be used right now: its
// sessions died and re-initialization failed or is backing off, or the
// backend is closed. Retrying later may succeed: errors.Is(err,
// backends.ErrUnavailable) holds, which the daemon maps to gRPC UNAVAILABLE.
// Err is the last cause (a pkcs11.Error, *TokenNotFoundError, *PINError, ...).
type UnavailableError struct {
	Token string
	Err   error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("pkcs11: token %s unavailable: %v", e.Token, e.Err)
}
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes every *UnavailableError match backends.ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == backends.ErrUnavailable }

// ErrKeyExists is returned by Create when the token already has a private key
// with the requested label: two keys with one label would make label-only
// URIs ambiguous.
var ErrKeyExists = errors.New("a private key with this label already exists")

// ErrClosed is wrapped by every call on a closed Backend.
var ErrClosed = errors.New("backend closed")
