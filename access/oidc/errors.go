package oidc

import (
	"errors"
	"fmt"
)

// ErrInvalidToken is matched (errors.Is) by every error Verify returns for a
// token it refuses. cardsignd answers UNAUTHENTICATED "identity token
// refused: REASON" (the Reason label only: which check failed says nothing the
// token's holder does not know), logs it and counts it by Reason.
var ErrInvalidToken = errors.New("oidc: invalid identity token")

// The reasons an *Error carries. They are stable: metrics use them as label
// values and operators grep logs for them.
const (
	ReasonTooLarge          = "too_large"          // longer than MaxTokenBytes; nothing was parsed
	ReasonMalformed         = "malformed"          // not three base64url segments of JSON objects, or a claim of the wrong type
	ReasonJWE               = "jwe"                // five segments: an encrypted token, which we never accept
	ReasonAlg               = "alg"                // alg missing, symmetric, "none", not allowed for the issuer, or not the key's
	ReasonCrit              = "crit"               // a "crit" header: we understand no extensions
	ReasonDuplicateKey      = "duplicate_key"      // a JSON name twice in the header or claims (or a flattened claim name twice)
	ReasonUntrustedIssuer   = "untrusted_issuer"   // iss names no configured issuer
	ReasonIssuerClaim       = "issuer_claim"       // iss missing or not a string
	ReasonUnknownKID        = "unknown_kid"        // the issuer's JWKS has no key with the token's kid
	ReasonSignature         = "signature"          // the signature does not verify
	ReasonExpired           = "expired"            // exp (with ClockSkew) is past, or exp is missing
	ReasonNotYetValid       = "not_yet_valid"      // nbf or iat (with ClockSkew) is in the future
	ReasonAudience          = "audience"           // aud does not hold the issuer's Audience
	ReasonClaims            = "claims"             // the issuer's claim requirements are not met
	ReasonSubject           = "subject"            // the SubjectClaim is missing, empty or not a string
	ReasonIssuerUnavailable = "issuer_unavailable" // the key was needed and the issuer could not be reached
)

// Error is a refused token. Reason is one of the Reason constants; Err says
// more for logs. Neither ever holds the token or a claim value: tokens are
// credentials, and an attacker-chosen string must not reach logs verbatim.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%v (%s)", ErrInvalidToken, e.Reason)
	}
	return fmt.Sprintf("%v (%s): %v", ErrInvalidToken, e.Reason, e.Err)
}

// Unwrap returns the underlying cause (a network error, for
// issuer_unavailable).
func (e *Error) Unwrap() error { return e.Err }

// Is makes every *Error match ErrInvalidToken.
func (e *Error) Is(target error) bool { return target == ErrInvalidToken }

// refuse builds an *Error with a formatted cause.
func refuse(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}
