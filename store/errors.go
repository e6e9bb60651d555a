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
	// ErrImmutable: an update tried to change a KID, CreatedAt, Public, URI
	// or Alg, which are fixed when a key is created.
	ErrImmutable = errors.New("store: immutable key field changed")
)
