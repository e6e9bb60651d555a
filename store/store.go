// Package store is cardsign's durable state: key records and the audit log.
//
// Callers depend on the Store interface only. SQLite (package store/sqlite)
// implements it now; a PostgreSQL implementation can follow without touching
// callers, and package store/storetest checks any implementation against the
// contract below.
package store

import (
	"context"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jwks"
)

// Store is durable state: keys and the audit log. Every method is safe for
// concurrent use, also by several processes sharing one store.
type Store interface {
	// CreateKey stores a new key record. A KID is never reused: creating a
	// KID that exists, even a revoked one, fails with ErrExists. check, when
	// not nil, sees every existing record inside the same transaction and
	// may refuse the insert (its error is returned as is): that is how "at
	// most one scheduled rotation" and "never bring back a revoked key" hold
	// across replicas.
	CreateKey(ctx context.Context, rec jwks.KeyRecord, check func(existing []jwks.KeyRecord) error) error

	// UpdateKeys runs fn over every key record inside one transaction and
	// writes back the records fn returns (matched by KID; records fn leaves
	// out are unchanged). fn must not change a KID or CreatedAt, Public, URI
	// or Alg: a returned record with an unknown KID fails with ErrNotFound,
	// one with a changed immutable field with ErrImmutable, and nothing is
	// written. An fn error aborts the transaction and is returned as is. fn
	// is called once per UpdateKeys call. This is how multi-key transitions
	// (rotate, activate, revoke) stay atomic across replicas.
	UpdateKeys(ctx context.Context, fn func(recs []jwks.KeyRecord) ([]jwks.KeyRecord, error)) error

	// ListKeys returns every key record, ordered by CreatedAt, then KID.
	ListKeys(ctx context.Context) ([]jwks.KeyRecord, error)

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

	// NextSequence returns the next value (1, 2, …) of a named durable
	// counter (the revocation document's sequence).
	NextSequence(ctx context.Context, name string) (int64, error)

	Close() error
}
