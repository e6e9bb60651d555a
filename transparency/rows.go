package transparency

import (
	"context"
	"fmt"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cardsign/cardsign/audit"
)

// Hash is a tree hash (SHA-256), as the stores keep it in their log rows.
// It is golang.org/x/mod/sumdb/tlog's, named here so that only this
// package imports tlog.
type Hash = tlog.Hash

// HashSize is the size of a Hash in bytes.
const HashSize = tlog.HashSize

// HashReader reads stored tree hashes by tlog storage index, in the order
// asked (the tree arithmetic's own interface).
type HashReader = tlog.HashReader

// HashReaderFunc is a function as a HashReader.
type HashReaderFunc = tlog.HashReaderFunc

// Verifier is a log key that checks checkpoint signatures
// (ParseVerifierKeys); it is golang.org/x/mod/sumdb/note's.
type Verifier = note.Verifier

// TreeStore is where a log's tree hashes are read from (store.Log).
type TreeStore interface {
	LogHashes(ctx context.Context, indexes []int64) ([]Hash, error)
}

// TreeRoot returns the root hash of the tree of the first size leaves st
// holds.
func TreeRoot(ctx context.Context, st TreeStore, size int64) (Hash, error) {
	return tlog.TreeHash(size, storeReader(ctx, st))
}

// storeReader is st as a tlog.HashReader bound to ctx.
func storeReader(ctx context.Context, st TreeStore) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) { return st.LogHashes(ctx, indexes) })
}

// Rows is what tree integration needs of a store: its log rows inside the
// transaction that appends the audit records, so the tree grows with them
// or not at all. A storage driver only reads and writes rows; how leaves
// and hashes are made is this package's.
type Rows interface {
	// ReadHashes returns the tree hashes stored at indexes (tlog storage
	// indexes), in the order asked.
	ReadHashes(ctx context.Context, indexes []int64) ([]Hash, error)
	// WriteLeaves stores the entries of leaves first, first+1, ... and the
	// tree hashes they add. A driver may queue the writes, to send them
	// with the transaction's other statements.
	WriteLeaves(ctx context.Context, first int64, entries [][]byte, hashes []StoredHash) error
}

// rowsReader is rows as a tlog.HashReader, which has no context.
func rowsReader(ctx context.Context, rows Rows) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) { return rows.ReadHashes(ctx, indexes) })
}

// Integrate makes recs, just appended to the audit log as stored (Seq,
// PrevHash and Hash set), leaves first, first+1, ... of the tree in rows,
// as Edge.Append does, and writes them. It returns the tree's edge after
// the append and the hashes it wrote, for the store to keep (HashCache)
// once its transaction committed.
func (e Edge) Integrate(ctx context.Context, rows Rows, first int64, recs []audit.Record) (Edge, []StoredHash, error) {
	entries, hashes, next, err := e.Append(first, recs, rowsReader(ctx, rows))
	if err != nil {
		return Edge{}, nil, err
	}
	if err := rows.WriteLeaves(ctx, first, entries, hashes); err != nil {
		return Edge{}, nil, err
	}
	return next, hashes, nil
}

// CatchUpStep is one chunk of a store's catch-up (catchUpRecords) written
// to rows: recs, the records after the log's size leaves read in the
// store's transaction, become leaves. It returns the log's new size.
func CatchUpStep(ctx context.Context, rows Rows, size, head int64, recs []audit.Record) (int64, error) {
	entries, hashes, err := catchUpRecords(size, head, recs, rowsReader(ctx, rows))
	if err != nil {
		return size, err
	}
	if err := rows.WriteLeaves(ctx, size, entries, hashes); err != nil {
		return size, fmt.Errorf("transparency log: write leaves from %d: %w", size, err)
	}
	return size + int64(len(entries)), nil
}
