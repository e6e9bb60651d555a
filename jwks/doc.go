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
// KeyRecords, renders and serves the JWKS of the published keys (Render,
// Handler), and signs, verifies and serves the revocation document
// (SignRevocations, VerifyRevocations, RevocationHandler). None of it keeps
// state: the same records and instant always give the same answer.
package jwks
