//go:build cgo && !nopkcs11

package pkcs11

import (
	"errors"
	"slices"

	p11 "github.com/miekg/pkcs11"
)

// errStale is returned internally when a token's sessions belong to an older
// C_Initialize of its module: they must not be used (the handle numbers may
// now name other sessions), so the token is re-initialized as if it had died.
var errStale = errors.New("sessions predate the module's re-initialization")

// errGone marks a failure of the readiness probe that means the token no
// longer answers as itself (C_GetTokenInfo fails, another token sits in its
// slot), which calls for re-initialization like a dead session.
var errGone = errors.New("token not answering")

// errDown makes token.run attempt the recovery of a token that is down and
// whose backoff has elapsed.
var errDown = errors.New("token down; re-initialization due")

// deadSession reports whether err means the session, its login or the object
// handle is gone, so that re-initializing (new sessions, log in, find the key
// again) and retrying once can succeed. Every other error is the token's
// considered answer (bad mechanism, bad data) and retrying would not help.
func deadSession(err error) bool {
	if errors.Is(err, errStale) || errors.Is(err, errGone) || errors.Is(err, errDown) {
		return true
	}
	return isCode(err,
		p11.CKR_SESSION_HANDLE_INVALID,
		p11.CKR_SESSION_CLOSED,
		p11.CKR_OBJECT_HANDLE_INVALID,
		p11.CKR_KEY_HANDLE_INVALID, // the key-handle twin of CKR_OBJECT_HANDLE_INVALID, from C_SignInit
		p11.CKR_USER_NOT_LOGGED_IN,
		p11.CKR_DEVICE_ERROR,
		p11.CKR_DEVICE_REMOVED,
		p11.CKR_TOKEN_NOT_PRESENT,
		p11.CKR_CRYPTOKI_NOT_INITIALIZED)
}

// isCode reports whether err is a PKCS #11 error with one of codes.
func isCode(err error, codes ...p11.Error) bool {
	var rv p11.Error
	return errors.As(err, &rv) && slices.Contains(codes, rv)
}

// unreachable reports whether a failure to re-open a token means the token
// (or the module's view of it) is gone, so re-initializing the whole module
// (C_Finalize, C_Initialize) is the remaining remedy. SoftHSM, for one, never
// sees a token again whose directory disappeared until it is re-initialized,
// and network HSM modules often need the same to reconnect.
func unreachable(err error) bool {
	var nf *TokenNotFoundError
	return deadSession(err) || errors.As(err, &nf) ||
		isCode(err, p11.CKR_GENERAL_ERROR, p11.CKR_FUNCTION_FAILED, p11.CKR_SLOT_ID_INVALID, p11.CKR_TOKEN_NOT_RECOGNIZED)
}

// pinRefused reports whether a C_Login error is about the PIN itself. These
// are never retried automatically: each try may count towards the token's
// lock-out.
func pinRefused(err error) bool {
	return isCode(err, p11.CKR_PIN_INCORRECT, p11.CKR_PIN_INVALID, p11.CKR_PIN_LEN_RANGE,
		p11.CKR_PIN_EXPIRED, p11.CKR_PIN_LOCKED)
}

// pinReason words a pinRefused error for a *PINError.
func pinReason(err error) string {
	var rv p11.Error
	errors.As(err, &rv)
	switch rv {
	case p11.CKR_PIN_INCORRECT:
		return "incorrect"
	case p11.CKR_PIN_LOCKED:
		return "locked (too many wrong tries)"
	case p11.CKR_PIN_EXPIRED:
		return "expired"
	}
	return "rejected"
}
