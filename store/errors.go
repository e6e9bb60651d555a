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
	// ErrUnavailable: the store cannot be reached now (connection lost,
	// server shutting down or restarting); the operation may be retried.
	// Nothing was committed unless the error says otherwise.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrFull: the store's volume has no space for the write (SQLite's
	// SQLITE_FULL); nothing was committed. It may succeed once space is
	// freed.
	ErrFull = errors.New("store: disk full")
	// ErrLeaseHeld: another holder holds the lease, unexpired.
	ErrLeaseHeld = errors.New("store: lease held by another holder")
	// ErrLeaseLost: a fenced write's lease expired or changed hands; the
	// writer is no longer the one entitled to write.
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrStaleDocument: a document's Seq is not greater than the stored
	// one's.
	ErrStaleDocument = errors.New("store: document sequence not newer than the stored one")
	// ErrStaleCursor: an event cursor would move back (another deliverer
	// moved it further meanwhile).
	ErrStaleCursor = errors.New("store: event cursor behind the stored one")
	// ErrSuperseded: a put that replaces a given version of an agent's
	// card found another newest version (or none): someone else wrote or
	// removed the agent meanwhile.
	ErrSuperseded = errors.New("store: agent card superseded")
)
