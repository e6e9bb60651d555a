// Package store is cardsign's durable state: key records, the audit log,
// leases and the documents replicas share.
//
// Callers depend on the Store interface only. SQLite (package store/sqlite)
// is the embedded default; PostgreSQL (package store/postgres) serves
// several replicas; package store/storetest checks both against the
// contract below.
package store

import (
	"context"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/transparency"
)

// Store is all of cardsign's durable state, one part per role: the daemon's
// composition root and the store copier take it whole; every other consumer
// names the roles it uses (Keys, AuditLog, Log, Leases, Documents, Agents,
// Clock). Every method is safe for concurrent use, also by several
// processes sharing one store.
type Store interface {
	Keys
	AuditLog
	Clock
	Leases
	Documents
	Agents
	Log
	Cosignatures
	Approvals
	EventCursors

	Close() error
}

// Keys is the key-record role: the key set and its changes, each change
// audited in the same transaction.
type Keys interface {
	// CreateKey stores a new key record. A KID is never reused: creating a
	// KID that exists, even a revoked one, fails with ErrExists. check, when
	// not nil, sees every existing record inside the same transaction and
	// may refuse the insert (its error is returned as is): that is how "at
	// most one scheduled rotation" and "never bring back a revoked key" hold
	// across replicas.
	CreateKey(ctx context.Context, rec jwks.KeyRecord, check func(existing []jwks.KeyRecord) error) error

	// MakeKey is CreateKey for a record that costs something to make (a
	// new key at an HSM or KMS): make runs inside the transaction that
	// holds the key-set lock, after every existing record was read, and
	// either refuses (its error is returned as is, nothing is written) or
	// returns the record to insert. Two processes calling MakeKey at once
	// run make one after the other, each seeing the other's record, so a
	// lost race ("a rotation is already scheduled") never leaves a key
	// made at a backend without a record. make is called at most once per
	// MakeKey call; a record with a KID that exists fails with ErrExists.
	MakeKey(ctx context.Context, make func(ctx context.Context, existing []jwks.KeyRecord) (jwks.KeyRecord, error)) (jwks.KeyRecord, error)

	// UpdateKeys runs fn over every key record inside one transaction and
	// writes back the records fn returns (matched by KID; records fn leaves
	// out are unchanged). fn must not change a KID or CreatedAt, Public, URI
	// or Alg: a returned record with an unknown KID fails with ErrNotFound,
	// one with a changed immutable field with ErrImmutable, and nothing is
	// written. An fn error aborts the transaction and is returned as is. fn
	// is called once per UpdateKeys call. This is how multi-key transitions
	// (rotate, activate, revoke) stay atomic across replicas.
	UpdateKeys(ctx context.Context, fn func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error)) error

	// ChangeKeys is MakeKey and UpdateKeys with the change's audit records,
	// in one transaction: fn runs under the key-set lock (and, for a
	// KeyTransition, the audit head's: see KeyChangeMode) over every key
	// record, and returns the change: at
	// most one record to create (a KID that exists fails with ErrExists),
	// records to update (as UpdateKeys: ErrNotFound, ErrImmutable), and
	// the key administration records (audit.Kind.IsKey) of the change, one
	// at least for every key it creates or updates, which are appended as
	// AppendAudit appends records. Every key change is so in the audit
	// chain and the transparency log, and a key record can be checked
	// against them (KeyTrail). An fn error is returned as is and nothing
	// is written; fn is called once. It returns the audit records as
	// stored.
	ChangeKeys(ctx context.Context, mode KeyChangeMode, fn func(ctx context.Context, recs []jwks.KeyRecord) (KeyChange, error)) ([]audit.Record, error)

	// BaselineKeys brings keys that no key administration record names
	// (made by a release before those records existed) into the audit
	// trail: in one ChangeKeys transaction (a KeyTransition's locks), unless
	// a key.baseline record exists already, it appends the record rec
	// makes (audit.KindKeyBaseline, stating the key as it is) for each such
	// key, and returns the records as stored; none when a baseline exists or
	// every key has a record. Replicas starting together append one
	// baseline. From it on, KeyTrail takes no key as legacy.
	BaselineKeys(ctx context.Context, rec func(jwks.KeyRecord) (audit.Record, error)) ([]audit.Record, error)

	// ListKeys returns every key record, ordered by CreatedAt, then KID.
	ListKeys(ctx context.Context) ([]jwks.KeyRecord, error)
}

// AuditLog is the audit role: the hash-chained records and their head.
type AuditLog interface {
	// AppendAudit appends in one transaction: it assigns Seq, PrevHash and
	// Hash (audit.Record.ComputeHash) from the chain head (AuditHead), ignoring
	// any the caller set, inserts, commits durably, and returns the records
	// as stored.
	audit.Committer

	// ListAudit returns up to limit records with Seq > afterSeq, ascending;
	// limit <= 0 means no limit.
	ListAudit(ctx context.Context, afterSeq int64, limit int) ([]audit.Record, error)

	// AuditHead returns the Seq and Hash of the last audit record ever
	// appended, or 0 and audit.Genesis() when there is none. It is a
	// durable high-water mark, kept apart from the records and advanced in
	// the same transaction as each append: records deleted from the end of
	// the log behind the store's back do not lower it, and AppendAudit
	// chains from it, so a Seq is never reused and the gap stays visible to
	// audit.VerifyChain (storetest.RunTampering checks this). The daemon
	// publishes it in the signed revocation document.
	AuditHead(ctx context.Context) (seq int64, hash []byte, err error)
}

// Clock is the shared clock and the named durable counters replicas take
// turns from.
type Clock interface {
	// NextSequence returns the next value (1, 2, …) of a named durable
	// counter (the revocation document's sequence).
	NextSequence(ctx context.Context, name string) (int64, error)

	// Now is the store's clock: the database server's for a shared store.
	// Replicas take times that other replicas compare (activation,
	// revocation, lease expiry) from it, not from their own clocks.
	Now(ctx context.Context) (time.Time, error)
}

// KeyChangeMode says when ChangeKeys takes the audit head's lock, which
// every append from every replica waits for.
type KeyChangeMode int

const (
	// KeyTransition: fn changes key states and takes its time (a
	// revocation's revoked_at) inside the transaction. The audit head is
	// locked before fn runs, so every record committed before the change
	// has an earlier time, as on SQLite, where one write lock covers both.
	KeyTransition KeyChangeMode = iota
	// KeyCreation: fn may make a key at its backend (a KMS call), which
	// appends should not wait for: the audit head is locked after fn. The
	// change's record may then carry a time before that of records
	// committed while fn ran.
	KeyCreation
)

// KeyChange is a change to the key set and its audit records
// (Store.ChangeKeys).
type KeyChange struct {
	Create *jwks.KeyRecord  // a new key record, or nil
	Update []jwks.KeyRecord // records to write over the stored ones (by KID)
	Audit  []audit.Record   // the key administration records of the change
}

// Leases are named, expiring leases on the store's clock, held by one
// holder at a time: duties done once per cluster run under one, and the
// writes they make are fenced by its epoch (see Documents.PutDocument), so
// a holder that paused past its lease's expiry cannot write.
type Leases interface {
	// AcquireLease takes the lease name for holder until the store's now +
	// ttl, or renews it when holder already holds it unexpired. Taking a
	// lease that is free or expired increments its Epoch; renewing keeps
	// it. When another holder's lease is unexpired, it returns that lease
	// and an error wrapping ErrLeaseHeld.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error)

	// ReleaseLease expires l now when it is still held as l (same holder
	// and epoch), so another holder can take it without waiting for the
	// TTL; otherwise it does nothing.
	ReleaseLease(ctx context.Context, l Lease) error
}

// Lease is a lease as the store granted it.
type Lease struct {
	Name    string
	Holder  string
	Epoch   int64     // 1 for the first holder; grows by one each time the lease is taken anew
	Expires time.Time // on the store's clock
}

// Documents are signed documents stored once and served by every replica
// (the revocation document): one replica signs, every replica serves the
// same bytes.
type Documents interface {
	// Document returns the stored document name, or an error wrapping
	// ErrNotFound when none was stored.
	Document(ctx context.Context, name string) (Document, error)

	// PutDocument replaces the document doc.Name, in a transaction that
	// checks fence is still held, unexpired, with its epoch (else
	// ErrLeaseLost) and that doc.Seq is greater than the stored
	// document's (else ErrStaleDocument); nothing is written on either
	// error. UpdatedAt is set by the store, on its clock.
	PutDocument(ctx context.Context, fence Lease, doc Document) error
}

// Document is a stored document: its name, its sequence number (it only
// grows), the bytes served, and what its writer needs to decide when to
// replace it (opaque to the store).
type Document struct {
	Name      string
	Seq       int64
	Body      []byte
	Meta      []byte
	UpdatedAt time.Time
}

// Counters is a Store whose named counters (NextSequence) can be read and
// raised without taking a value: what copying a store needs, so that a
// counter never goes back across the copy.
type Counters interface {
	// Counter returns the counter's current value: the last NextSequence
	// returned, 0 when it was never used.
	Counter(ctx context.Context, name string) (int64, error)
	// RaiseCounter sets the counter to atLeast when it is below it.
	RaiseCounter(ctx context.Context, name string, atLeast int64) error
}

// Topics a Watcher reports.
const (
	TopicKeys      = "keys"      // a key record was created or changed
	TopicDocuments = "documents" // a document was stored
)

// Watcher is a Store that announces changes committed by other processes
// (PostgreSQL: LISTEN/NOTIFY). Callers still re-read periodically: an
// announcement can be lost with its connection.
type Watcher interface {
	// Watch calls fn with a topic after a change to it was committed, and
	// with "" after (re)connecting, when announcements may have been
	// missed. It blocks until ctx is done, reconnecting as needed, and
	// returns ctx's error.
	Watch(ctx context.Context, fn func(topic string)) error
}

// Log is the transparency log's storage (package transparency): leaf i is
// the entry of audit record Seq i+1. AppendAudit writes each record's entry
// (transparency.NewEntry of the record as stored, with its Hosts) and the
// tree hashes it adds (transparency.AppendHashes) in the record's
// transaction, so the tree always has exactly AuditHead's Seq leaves and
// log and audit cannot drift. ListAudit fills each record's Hosts from its
// entry.
type Log interface {
	// LogHashes returns the tree hashes stored at indexes (tlog storage
	// indexes, tlog.StoredHashIndex), in the order asked. An index that is
	// not stored fails with an error wrapping ErrNotFound.
	LogHashes(ctx context.Context, indexes []int64) ([]transparency.Hash, error)
	// LogEntries returns the encoded entries of leaves from to to-1, in
	// order. A leaf that is not stored fails with an error wrapping
	// ErrNotFound.
	LogEntries(ctx context.Context, from, to int64) ([][]byte, error)
}

// Cosignatures is where the witnesses' cosignatures of the log's checkpoints
// are kept (transparency.Cosignature), one set for every replica sharing the
// store. One replica at a time asks the witnesses (under the duties lease);
// every replica reads what they answered, to serve the cosigned checkpoint
// and to put it in the proofs it returns.
type Cosignatures interface {
	// PutCosignatures stores cs: one row per (Size, Witness), a later
	// cosignature of the same size by the same witness replacing the
	// earlier (a witness asked again signs again, with a new timestamp).
	PutCosignatures(ctx context.Context, cs []transparency.Cosignature) error
	// Cosignatures returns the stored cosignatures of sizes from and up,
	// largest size first (then by witness name), at most limit of them.
	Cosignatures(ctx context.Context, from int64, limit int) ([]transparency.Cosignature, error)
	// WitnessSizes returns, for each witness with a stored cosignature, the
	// largest size it cosigned: the size it was last seen at.
	WitnessSizes(ctx context.Context) (map[string]int64, error)
	// PruneCosignatures deletes the cosignatures of sizes below below,
	// keeping each witness's largest (WitnessSizes reads it).
	PruneCosignatures(ctx context.Context, below int64) error
}
