package transparency

import (
	"context"
	"sync/atomic"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cardsign/cardsign/audit"
)

// Tail is what one store process knows of the log's right end: the edge
// its last committed append left (so that its next append, if no one
// appended since, reads no tree hashes) and the tree hashes it knows to be
// committed (HashCache). Both SQL stores keep one; it is safe for
// concurrent use.
type Tail struct {
	edge   atomic.Pointer[Edge]
	hashes *HashCache
}

// NewTail returns a Tail that knows nothing yet, caching at most
// cacheSize hashes (<= 0: DefaultHashCacheSize).
func NewTail(cacheSize int) *Tail {
	return &Tail{hashes: NewHashCache(cacheSize)}
}

// Appended is what one transaction's append wrote to the log: the edge of
// the tree after it and the tree hashes it stored. The transaction keeps it
// and hands it to Tail.Committed once it has committed; a rolled-back
// transaction drops it. The zero Appended is an append that wrote nothing.
type Appended struct {
	edge    Edge
	written []StoredHash
	ok      bool
}

// Appending tells the tail an append found the audit log (and, caught up,
// the log) at size leaves; see HashCache.Appending.
func (t *Tail) Appending(size int64) { t.hashes.Appending(size) }

// Extend integrates out, the records an append just inserted after record
// seq, into the log inside the append's transaction (Edge.Integrate),
// starting from the edge this tail's last committed append left unless
// caughtUp (leaves were made in this transaction: the kept edge is not
// this tree's).
func (t *Tail) Extend(ctx context.Context, rows Rows, seq int64, out []audit.Record, caughtUp bool) (Appended, error) {
	var last Edge
	if e := t.edge.Load(); e != nil && !caughtUp {
		last = *e
	}
	edge, written, err := last.Integrate(ctx, rows, seq, out)
	if err != nil {
		return Appended{}, err
	}
	return Appended{edge: edge, written: written, ok: true}, nil
}

// Committed keeps what a committed transaction appended. Racing another
// append of this process, the older edge may win, which costs the next
// append a read, never a wrong tree: the edge names its tree by its head
// hash.
func (t *Tail) Committed(a Appended) {
	if !a.ok {
		return
	}
	t.edge.Store(&a.edge)
	t.hashes.Add(a.written)
}

// ReadHashes returns the tree hashes at indexes, reading those the tail
// does not know with load; see HashCache.Read.
func (t *Tail) ReadHashes(ctx context.Context, indexes []int64, load func(context.Context, []int64) ([]tlog.Hash, error)) ([]tlog.Hash, error) {
	return t.hashes.Read(ctx, indexes, load)
}
