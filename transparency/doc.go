// Package transparency is cardsign's transparency log: an RFC 6962 Merkle
// tree with one leaf per audit record, signed checkpoints in the C2SP
// signed-note format, offline inclusion proofs in the C2SP tlog-proof format,
// and the C2SP tlog-tiles layout in which the tree is served.
//
// The tree arithmetic is golang.org/x/mod/sumdb/tlog's; checkpoints are
// github.com/transparency-dev/formats/log's, signed with
// golang.org/x/mod/sumdb/note. What this package adds is cardsign's: what a
// leaf says (Entry), how a proof travels in a card's signature (Proof, in the
// unprotected header member HeaderMember) and how it is checked against the
// signature it sits in.
//
// Leaf i of the tree is the entry of audit record Seq i+1: the log has as
// many leaves as the audit log has records, and the store appends both in
// one transaction. How leaves and tree hashes are made (Edge.Integrate,
// CatchUpStep, HashCache) is this package's; a store only reads and writes
// their rows (Rows). The Checkpointer signs checkpoints and proofs over the
// store's tree, CheckSharedKeys keeps replicas on one log key, and
// AuditChecker checks a served log against the audit records.
//
// The package has no net/http: tlogclient reads a served log (and
// monitors it), tlogserve serves it. No package outside transparency/
// imports tlog, note or transparency-dev: Hash, HashReader and Verifier
// name theirs here.
package transparency
