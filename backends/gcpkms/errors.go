//go:build !nogcpkms

package gcpkms

import (
	"errors"
	"fmt"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// The typed errors below are what callers branch on. They name key
// resources and Cloud KMS status messages only; credentials never reach
// them (the client library keeps tokens out of its errors, and URIs carry
// none).

// UnavailableError reports that Cloud KMS could not answer in time: it kept
// throttling (RESOURCE_EXHAUSTED) or failing (UNAVAILABLE, DEADLINE_EXCEEDED)
// until the caller's deadline, or the backend is closed. errors.Is(err,
// backends.ErrUnavailable) holds, which the daemon maps to gRPC UNAVAILABLE;
// Err is the last cause, with context.DeadlineExceeded when the deadline
// ended the retries.
type UnavailableError struct {
	Op       string // "sign", "get public key", ...
	Name     string // the resource
	Attempts int
	Err      error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("gcpkms: %s %s: Cloud KMS unavailable after %d attempt(s): %v", e.Op, e.Name, e.Attempts, e.Err)
}
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes every *UnavailableError match backends.ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == backends.ErrUnavailable }

// IntegrityError reports a Cloud KMS response that failed its integrity
// checks: a CRC32C that does not match what it covers, a request checksum
// the service did not confirm, or another key version's name. The response
// is discarded; a damaged response is retried once, a wrong name never.
type IntegrityError struct {
	Name   string // the key version asked for
	Field  string // the response field that failed, e.g. "signature_crc32c"
	Reason string
	retry  bool
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("gcpkms: integrity check failed for %s: %s: %s", e.Name, e.Field, e.Reason)
}

// KeyNotFoundError reports a key version or CryptoKey Cloud KMS does not
// have (NOT_FOUND). A caller without permission to see a resource gets
// PERMISSION_DENIED instead, which is not turned into this error: Cloud
// KMS's message then says "or it may not exist".
type KeyNotFoundError struct {
	Name string
	Err  error
}

func (e *KeyNotFoundError) Error() string {
	return fmt.Sprintf("gcpkms: key %s not found: %v", e.Name, e.Err)
}
func (e *KeyNotFoundError) Unwrap() error { return e.Err }

// Is makes every *KeyNotFoundError match backends.ErrKeyNotFound.
func (e *KeyNotFoundError) Is(target error) bool { return target == backends.ErrKeyNotFound }

// KeyStateError reports a key version that cannot sign in its state:
// DISABLED, DESTROYED, DESTROY_SCHEDULED, still PENDING_GENERATION, or
// GENERATION_FAILED. State is "" when Cloud KMS refused a call
// (FAILED_PRECONDITION) without saying which; Err is that refusal.
type KeyStateError struct {
	Name  string
	State string
	Err   error
}

func (e *KeyStateError) Error() string {
	if e.State == "" {
		return fmt.Sprintf("gcpkms: key version %s is not enabled: %v", e.Name, e.Err)
	}
	msg := fmt.Sprintf("gcpkms: key version %s is %s, not ENABLED", e.Name, e.State)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}
func (e *KeyStateError) Unwrap() error { return e.Err }

// Is makes every *KeyStateError match backends.ErrKeyDisabled: the version
// exists but Cloud KMS will not sign with it in its state until someone
// enables (or restores) it.
func (e *KeyStateError) Is(target error) bool { return target == backends.ErrKeyDisabled }

// UnsupportedAlgorithmError reports a key version (or a CryptoKey's version
// template) whose algorithm has no JOSE alg cardsign signs with, or a key
// that is not for asymmetric signing.
type UnsupportedAlgorithmError struct {
	Name      string
	Algorithm string // the Cloud KMS algorithm or purpose, e.g. "EC_SIGN_SECP256K1_SHA256"
}

func (e *UnsupportedAlgorithmError) Error() string {
	return fmt.Sprintf("gcpkms: key %s has algorithm %s, which cardsign cannot sign with (supported: EC_SIGN_P256_SHA256, EC_SIGN_P384_SHA384, RSA_SIGN_PKCS1_*_SHA256, RSA_SIGN_PSS_*_SHA256, EC_SIGN_ED25519)", e.Name, e.Algorithm)
}

// AlgorithmMismatchError reports that Create was asked for a JOSE alg the
// CryptoKey's version template does not make: in Cloud KMS the template, not
// the request, decides the algorithm of a new version.
type AlgorithmMismatchError struct {
	CryptoKey string
	Want      jose.Alg
	Template  string   // the template's Cloud KMS algorithm
	Have      jose.Alg // the alg the template makes; "" when none cardsign supports
}

func (e *AlgorithmMismatchError) Error() string {
	have := "no JOSE alg cardsign supports"
	if e.Have != "" {
		have = string(e.Have)
	}
	return fmt.Sprintf("gcpkms: CryptoKey %s makes %s versions (%s), not %s: its version template decides the algorithm; use a CryptoKey whose template makes %s",
		e.CryptoKey, e.Template, have, e.Want, e.Want)
}

// ErrClosed is wrapped by every call on a closed Backend (inside an
// *UnavailableError).
var ErrClosed = errors.New("backend closed")
