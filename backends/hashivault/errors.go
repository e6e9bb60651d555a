//go:build !novault

package hashivault

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cardsign/cardsign/backends"
)

// The typed errors below are what callers branch on. They name keys,
// versions and Vault's own messages; tokens, secret IDs and service account
// tokens never reach them (Vault does not echo them, and the client's
// errors name the URL only).

// KeyNotFoundError reports a Transit key Vault does not have, or a version
// it no longer has (trimmed, or never made).
type KeyNotFoundError struct {
	Key     string
	Version int // 0 when the key itself is missing
	Reason  string
}

func (e *KeyNotFoundError) Error() string {
	if e.Version == 0 {
		return fmt.Sprintf("hashivault: Transit key %s not found: %s", e.Key, e.Reason)
	}
	return fmt.Sprintf("hashivault: Transit key %s has no version %d: %s", e.Key, e.Version, e.Reason)
}

// Is makes every *KeyNotFoundError match backends.ErrKeyNotFound.
func (e *KeyNotFoundError) Is(target error) bool { return target == backends.ErrKeyNotFound }

// UnsupportedKeyError reports a key that cannot sign a JWS cardsign makes:
// an encryption key, a key type without a JOSE alg, a public key that does
// not parse.
type UnsupportedKeyError struct {
	Key    string
	Reason string
}

func (e *UnsupportedKeyError) Error() string {
	return fmt.Sprintf("hashivault: Transit key %s is not supported: %s", e.Key, e.Reason)
}

// DeniedError reports a request Vault refused with 403: the token's
// policies do not allow the path, or the token is not valid (and logging in
// again did not help).
type DeniedError struct {
	Op, Path string
	Errors   string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("hashivault: %s: Vault denied %s (%s): grant the token's policy the capability on this path (docs: README Key URIs)",
		e.Op, e.Path, e.Errors)
}

// LoginError reports that the backend could not get a token: the login
// was refused, or the configured token is not valid.
type LoginError struct {
	Method string
	Err    error
}

func (e *LoginError) Error() string {
	return fmt.Sprintf("hashivault: %s login: %v", e.Method, e.Err)
}
func (e *LoginError) Unwrap() error { return e.Err }

// UnavailableError reports that Vault could not answer in time: it kept
// throttling (429), was sealed or failing (5xx), or unreachable, until the
// deadline; or the backend is closed. errors.Is(err,
// backends.ErrUnavailable) holds.
type UnavailableError struct {
	Op, Key  string
	Attempts int
	Err      error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("hashivault: %s %s: Vault unavailable after %d attempt(s): %v", e.Op, e.Key, e.Attempts, e.Err)
}
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes every *UnavailableError match backends.ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == backends.ErrUnavailable }

// ErrClosed is wrapped by every call on a closed Backend.
var ErrClosed = errors.New("backend closed")

// vaultErrors joins the messages of Vault's {"errors":[...]}, quoted: they
// are the server's text, printed escaped.
func vaultErrors(errs []string) string {
	if len(errs) == 0 {
		return "no message"
	}
	return strconv.Quote(strings.Join(errs, "; "))
}
