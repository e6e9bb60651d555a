package store

import (
	"errors"
	"fmt"

	"github.com/cardsign/cardsign/audit"
)

// Sentinel errors, wrapped with context by implementations: test with
// errors.Is.
var (
	// ErrNotFound: no key with that KID.
	ErrNotFound = errors.New("store: not found")
	// ErrExists: the KID is taken. KIDs are never reused, so a revoked
	// key's KID stays taken forever.
	ErrExists = errors.New("store: already exists")
	// ErrKeyRevoked refuses an audit record, and so the signature it
	// records, by a key that is revoked when the record is appended,
	// whatever the record's time: once a revocation is committed, no
	// signature by that key is returned, and every record by it precedes
	// the revocation. It wraps audit.ErrRecordRejected, so a batch holding
	// one such record does not fail the others.
	ErrKeyRevoked = fmt.Errorf("store: signing key is revoked: %w", audit.ErrRecordRejected)
	// ErrImmutable: an update tried to change a KID, CreatedAt, Public, URI
	// or Alg, which are fixed when a key is created.
	ErrImmutable = errors.New("store: immutable key field changed")
)
