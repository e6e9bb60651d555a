// Package jwks reads and writes JWK Set documents (RFC 7517 §5): the public
// keys verifiers use to check card signatures.
//
// A Set is rendered deterministically (the same keys always give the same
// bytes, so HTTP ETags are stable) and never holds private members. Parsing
// is strict where it protects verifiers: a document that carries private
// keys, two keys with one kid, or more than MaxSize bytes is refused.
//
// The package also derives key lifecycle states (Derive: scheduled, pending,
// active, retired, expired, revoked) from the timestamps of stored
// KeyRecords, renders the JWKS of the published keys (Render), and signs and
// verifies the revocation document (SignRevocations, VerifyRevocations).
// None of it keeps state: the same records and instant always give the same
// answer. Serving the documents over HTTP is jwks/jwksserve's job, fetching
// them jwks/jwksfetch's, so that jwks (and signer above it) has no net/http.
package jwks
