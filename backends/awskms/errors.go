//go:build !noawskms

package awskms

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/internal/retry"
	"github.com/cardsign/cardsign/jose"
)

// The typed errors below are what callers branch on: the daemon maps
// *UnavailableError (errors.Is backends.ErrUnavailable) to "retry later",
// and the others into advice for the operator. Keys are named by the ID,
// ARN or alias the caller gave, or the key ARN once it is known; none of
// them carries credentials.

// KeyNotFoundError reports a key ID, ARN or alias that KMS does not know
// (NotFoundException), in the region the request went to.
type KeyNotFoundError struct {
	Key string
	Err error // the KMS error
}

func (e *KeyNotFoundError) Error() string {
	return fmt.Sprintf("awskms: key %s not found (check the key ID, alias and region): %v", e.Key, e.Err)
}
func (e *KeyNotFoundError) Unwrap() error { return e.Err }

// Is makes every *KeyNotFoundError match backends.ErrKeyNotFound.
func (e *KeyNotFoundError) Is(target error) bool { return target == backends.ErrKeyNotFound }

// KeyStateError reports a key that exists but cannot sign in its present
// state: Disabled, PendingDeletion, PendingImport, Unavailable... State is
// the KeyState KMS reported, or "" when KMS refused the request without
// saying (DisabledException names no state beyond "disabled").
type KeyStateError struct {
	Key   string
	State string
	Err   error // the KMS error, nil when DescribeKey reported the state
}

func (e *KeyStateError) Error() string {
	state := e.State
	if state == "" {
		state = "not usable"
	}
	msg := fmt.Sprintf("awskms: key %s is %s, not Enabled", e.Key, state)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}
func (e *KeyStateError) Unwrap() error { return e.Err }

// Is makes every *KeyStateError match backends.ErrKeyDisabled: the key is
// there but KMS will not sign with it until someone enables it (or cancels
// its deletion).
func (e *KeyStateError) Is(target error) bool { return target == backends.ErrKeyDisabled }

// UnsupportedKeyError reports a key that cannot sign any JOSE alg
// cardsign supports: a symmetric, HMAC, ML-DSA, SM2 or secp256k1 key, a key
// whose KeyUsage is not SIGN_VERIFY, or one whose public key does not match
// its KeySpec.
type UnsupportedKeyError struct {
	Key    string
	Reason string
	Err    error // the KMS error, if KMS refused
}

func (e *UnsupportedKeyError) Error() string {
	msg := fmt.Sprintf("awskms: key %s is not supported: %s", e.Key, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}
func (e *UnsupportedKeyError) Unwrap() error { return e.Err }

// AlgMismatchError reports a JOSE alg that a KeySpec cannot sign: an
// ?alg= on a key URI that does not fit the key (PS256 on an EC key), or a
// Create for an alg the configured KeySpec does not fit. Key is "" for
// Create.
type AlgMismatchError struct {
	Key     string
	KeySpec string
	Alg     jose.Alg
}

func (e *AlgMismatchError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("awskms: create: the configured KeySpec %s cannot sign %s (keyspecs for %s: %s)",
			e.KeySpec, e.Alg, e.Alg, keySpecsFor(e.Alg))
	}
	return fmt.Sprintf("awskms: key %s has KeySpec %s, which cannot sign %s", e.Key, e.KeySpec, e.Alg)
}

// KeyIDMismatchError reports a KMS answer naming another key than the one
// asked for. The backend resolves aliases at Open and asks by key ARN, so
// any other KeyId in a response means the answer cannot be trusted (a
// misrouted endpoint, a proxy mixing up responses, or a bug); the
// signature is discarded.
type KeyIDMismatchError struct {
	Op   string // "Sign", "GetPublicKey"
	Want string // the key ARN asked for
	Got  string // the KeyId in the response
}

func (e *KeyIDMismatchError) Error() string {
	return fmt.Sprintf("awskms: %s response is for key %q, not the key asked for %s; response discarded", e.Op, e.Got, e.Want)
}

// MessageTooLargeError reports an EdDSA signing input over the 4096 bytes
// KMS accepts as a RAW message. Ed25519 signs the whole message (there is no
// digest to send instead), so such a card cannot be signed with an AWS KMS
// Ed25519 key at all; use an EC or RSA key, or make the card smaller.
type MessageTooLargeError struct {
	Key   string
	Size  int
	Limit int
}

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("awskms: sign with %s: EdDSA signing input is %d bytes, over the %d-byte limit of AWS KMS for RAW messages (Ed25519 signs the whole message; use an EC or RSA key for larger cards)",
		e.Key, e.Size, e.Limit)
}

// UnavailableError reports a KMS that could not answer in time: throttling,
// internal errors, 5xx or transport errors until the deadline (or the retry
// window) left no room for another attempt, or the client-side rate limit
// could not admit the request before the deadline. errors.Is(err,
// backends.ErrUnavailable) holds. Err is the last KMS error (nil if no
// attempt was made); Reason is why the backend stopped (a context error, a
// rate-limit refusal, ErrClosed). Both are unwrapped, so errors.Is(err,
// context.DeadlineExceeded) works too.
type UnavailableError struct {
	Op       string
	Key      string
	Attempts int
	Err      error
	Reason   error
}

func (e *UnavailableError) Error() string {
	msg := fmt.Sprintf("awskms: %s %s: KMS unavailable after %d attempt(s)", e.Op, e.Key, e.Attempts)
	if e.Reason != nil {
		msg += ": " + e.Reason.Error()
	}
	if e.Err != nil {
		msg += "; last error: " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the last KMS error and the reason for stopping.
func (e *UnavailableError) Unwrap() []error { return retry.Causes(e.Err, e.Reason) }

// Is makes every *UnavailableError match backends.ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == backends.ErrUnavailable }

// AliasError reports a Create that made the key but could not point the
// configured alias at it. The key exists and is usable under URI; the alias
// still names its old key (or nothing).
type AliasError struct {
	Alias string
	URI   string // the new key's URI
	Err   error
}

func (e *AliasError) Error() string {
	return fmt.Sprintf("awskms: created key %s but could not move %s to it: %v", e.URI, e.Alias, e.Err)
}
func (e *AliasError) Unwrap() error { return e.Err }

// ErrClosed is the Reason of the *UnavailableError every call on a closed
// Backend returns.
var ErrClosed = errors.New("backend closed")

// kmsError turns the KMS errors that say something about the key into
// typed errors; others are returned as they are.
func kmsError(key string, err error) error {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return err
	}
	var una *UnavailableError
	if errors.As(err, &una) {
		return err
	}
	switch api.ErrorCode() {
	case "NotFoundException":
		return &KeyNotFoundError{Key: key, Err: err}
	case "DisabledException":
		return &KeyStateError{Key: key, State: string(types.KeyStateDisabled), Err: err}
	case "KMSInvalidStateException":
		return &KeyStateError{Key: key, Err: err}
	case "InvalidKeyUsageException":
		return &UnsupportedKeyError{Key: key, Reason: "KMS refused the key or signing algorithm for this operation", Err: err}
	}
	return err
}

// fail returns err, wrapped with "awskms: what: " unless it is one of the
// typed errors, which say what failed themselves. Errors carry no
// credentials: the SDK's errors name operations, status codes and request
// IDs, and KMS's messages name keys and principals.
func (b *Backend) fail(what string, err error) error {
	if what == "" || backends.AsAny(err, new(*KeyNotFoundError), new(*KeyStateError), new(*UnsupportedKeyError),
		new(*AlgMismatchError), new(*KeyIDMismatchError), new(*UnavailableError), new(*MessageTooLargeError)) {
		return err
	}
	return fmt.Errorf("awskms: %s: %w", what, err)
}
