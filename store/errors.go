package store

import "errors"

// Sentinel errors, wrapped with context by implementations: test with
// errors.Is.
var (
	// ErrNotFound: no key with that KID.
	ErrNotFound = errors.New("store: not found")
	// ErrExists: the KID is taken. KIDs are never reused, so a revoked
	// key's KID stays taken forever.
	ErrExists = errors.New("store: already exists")
	// ErrKeyRevoked refuses an audit record, and so the signature it
	// records, by a key revoked at or before the record's time: a replica
	// that has not yet seen a revocation cannot return a signature by that
	// key.
	ErrKeyRevoked = errors.New("store: signing key is revoked")
	// ErrImmutable: an update tried to change a KID, CreatedAt, Public, URI
	// or Alg, which are fixed when a key is created.
	ErrImmutable = errors.New("store: immutable key field changed")
)
