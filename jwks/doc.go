// Package jwks reads and writes JWK Set documents (RFC 7517 §5): the public
// keys verifiers use to check card signatures.
//
// A Set is rendered deterministically (the same keys always give the same
// bytes, so HTTP ETags are stable) and never holds private members. Parsing
// is strict where it protects verifiers: a document that carries private
// keys, two keys with one kid, or more than MaxSize bytes is refused.
//
// Key lifecycle (pending, active, retired, expired, revoked) will live here
// too; it builds on Set and does not change it.
package jwks
