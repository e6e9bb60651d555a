// Package audit is cardsign's tamper-evident audit log: one Record per
// signature, one per card the signing policy refused (Outcome "refused"),
// and one per key or registry administration (a Kind such as
// KindKeyRevoke, with a Detail), each carrying the SHA-256 of its
// predecessor, so deleting, reordering or editing any record breaks every
// hash after it (VerifyChain).
//
// The package does no I/O. A store assigns sequence numbers and hashes when it
// appends records (Committer); Batcher groups concurrent appends into one
// durable transaction so an fsync per signature does not cap throughput.
package audit
