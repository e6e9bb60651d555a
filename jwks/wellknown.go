package jwks

import "time"

// Where cardsignd serves its documents, beside each other so a verifier that
// knows the JWKS URL can find the revocation document (and, at
// transparency.KeyPath, the transparency log's keys).
const (
	JWKSPath        = "/.well-known/jwks.json"
	RevocationsPath = "/.well-known/cardsign-revocations.json"
)

// String is how a revocation is reported to people: "revoked at TIME (REASON)".
func (r Revocation) String() string {
	return "revoked at " + r.RevokedAt.UTC().Format(time.RFC3339) + " (" + r.Reason + ")"
}
