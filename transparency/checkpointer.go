package transparency

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cardsign/cardsign/audit"
)

// Tree is what a Checkpointer reads of a store (store.AuditLog and
// store.Log satisfy it): the audit head, whose Seq is the tree's committed
// size, and the log's rows.
type Tree interface {
	AuditHead(ctx context.Context) (seq int64, hash []byte, err error)
	TreeStore
	LogEntries(ctx context.Context, from, to int64) ([][]byte, error)
}

// Checkpointer is the authority's side of the transparency log: the store
// keeps the tree (appended with every audit record); a Checkpointer signs
// checkpoints and proves signatures in them. Checkpoints are signed at most
// once per tree size: every card committed in one audit transaction shares
// one. It is also the Source the log's HTTP handler serves.
type Checkpointer struct {
	signer *Signer
	store  Tree

	mu     sync.Mutex // held while a checkpoint is made, so concurrent callers share it
	latest checkpoint
	// size is the largest tree size this process's own audit commits
	// reached: a committed size, known without asking the store.
	size atomic.Int64
}

// Committed learns the tree's size from an audit transaction's records,
// before any caller among them asks for its proofs (audit.BatcherOptions):
// they then share one checkpoint, signed for all of them.
func (t *Checkpointer) Committed(recs []audit.Record) {
	var top int64
	for _, r := range recs {
		top = max(top, r.Seq)
	}
	for {
		cur := t.size.Load()
		if top <= cur || t.size.CompareAndSwap(cur, top) {
			return
		}
	}
}

// checkpoint is a signed checkpoint of a tree of size leaves.
type checkpoint struct {
	size int64
	note []byte
}

// NewCheckpointer returns a Checkpointer signing with s the tree st holds.
func NewCheckpointer(s *Signer, st Tree) *Checkpointer {
	return &Checkpointer{signer: s, store: st}
}

// atLeast returns a checkpoint of at least size leaves, signing one for the
// tree as it is now when the latest is smaller.
func (t *Checkpointer) atLeast(ctx context.Context, size int64) (checkpoint, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.latest.note != nil && t.latest.size >= size {
		return t.latest, nil
	}
	if known := t.size.Load(); known >= size {
		// Committed by this process: no need to ask the store how far the
		// tree reaches.
		return t.sign(ctx, known)
	}
	return t.signNow(ctx)
}

// current returns a checkpoint of the tree as it is now: the latest signed
// one when the tree has not grown since. The size is read from the store
// each time, so that replicas behind a load balancer serve checkpoints and
// tiles of the same committed tree (a checkpoint cached for a while could
// lag another replica's, and its tiles answer 404 to a client holding the
// newer one).
func (t *Checkpointer) current(ctx context.Context) (checkpoint, error) {
	size, _, err := t.store.AuditHead(ctx)
	if err != nil {
		return checkpoint{}, fmt.Errorf("transparency log: tree size: %w", err)
	}
	return t.atLeast(ctx, size)
}

// signNow signs a checkpoint of the tree's committed size; t.mu is held.
func (t *Checkpointer) signNow(ctx context.Context) (checkpoint, error) {
	size, _, err := t.store.AuditHead(ctx)
	if err != nil {
		return checkpoint{}, fmt.Errorf("transparency log: tree size: %w", err)
	}
	return t.sign(ctx, size)
}

// sign signs a checkpoint of the tree of size leaves, all committed; t.mu
// is held.
func (t *Checkpointer) sign(ctx context.Context, size int64) (checkpoint, error) {
	if size < t.latest.size {
		// Another replica's view cannot be older than one we signed: the
		// store went back (restored from a backup). Signing the smaller
		// tree would be a rollback every monitor reports.
		return checkpoint{}, fmt.Errorf("transparency log: the store holds %d leaves, fewer than the %d of a checkpoint already signed: was the database restored from a backup?", size, t.latest.size)
	}
	root, err := TreeRoot(ctx, t.store, size)
	if err != nil {
		return checkpoint{}, fmt.Errorf("transparency log: root of %d leaves: %w", size, err)
	}
	note, err := t.signer.Sign(size, root)
	if err != nil {
		return checkpoint{}, err
	}
	t.latest = checkpoint{size: size, note: note}
	return t.latest, nil
}

// Proofs returns the inclusion proof of each committed record, in one
// checkpoint.
func (t *Checkpointer) Proofs(ctx context.Context, recs []audit.Record) ([]Proof, error) {
	var top int64
	for _, r := range recs {
		top = max(top, r.Seq)
	}
	cp, err := t.atLeast(ctx, top)
	if err != nil {
		return nil, err
	}
	out := make([]Proof, len(recs))
	for i, r := range recs {
		p, err := prove(NewEntry(r, r.Hosts).Marshal(), r.Seq-1, cp.size, cp.note, t.reader(ctx))
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// reader reads the tree's stored hashes (the store caches the ones new
// proofs read).
func (t *Checkpointer) reader(ctx context.Context) tlog.HashReader { return storeReader(ctx, t.store) }

// Checkpoint returns a checkpoint of the tree as it is now, and its size
// (Source).
func (t *Checkpointer) Checkpoint(ctx context.Context) (int64, []byte, error) {
	cp, err := t.current(ctx)
	return cp.size, cp.note, err
}

// Size returns the tree's committed size, read from the store (Source).
func (t *Checkpointer) Size(ctx context.Context) (int64, error) {
	size, _, err := t.store.AuditHead(ctx)
	return size, err
}

// ReadHashes returns the tree hashes stored at indexes (Source).
func (t *Checkpointer) ReadHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	return t.reader(ctx).ReadHashes(indexes)
}

// Entries returns the encoded entries of leaves from to to-1 (Source).
func (t *Checkpointer) Entries(ctx context.Context, from, to int64) ([][]byte, error) {
	return t.store.LogEntries(ctx, from, to)
}

// CheckpointAt returns the log's signed checkpoint of the tree's first size
// leaves, all committed: the same bytes every replica signs for that size
// (Ed25519 is deterministic), so a witness's cosignature of it stays valid
// on any replica's copy.
func (t *Checkpointer) CheckpointAt(ctx context.Context, size int64) ([]byte, error) {
	t.mu.Lock()
	if t.latest.note != nil && t.latest.size == size {
		defer t.mu.Unlock()
		return t.latest.note, nil
	}
	t.mu.Unlock()
	root, err := TreeRoot(ctx, t.store, size)
	if err != nil {
		return nil, fmt.Errorf("transparency log: root of %d leaves: %w", size, err)
	}
	return t.signer.Sign(size, root)
}

// ConsistencyProof proves that the tree of new leaves extends the tree of
// old leaves (RFC 6962 §2.1.2), as C2SP tlog-witness's add-checkpoint
// carries it. old 0 and old == new need no hashes.
func (t *Checkpointer) ConsistencyProof(ctx context.Context, old, new int64) ([]Hash, error) {
	if old < 0 || old > new {
		return nil, fmt.Errorf("transparency log: no consistency proof from %d to %d leaves", old, new)
	}
	if old == 0 || old == new {
		return nil, nil
	}
	p, err := tlog.ProveTree(new, old, t.reader(ctx))
	if err != nil {
		return nil, fmt.Errorf("transparency log: consistency proof from %d to %d leaves: %w", old, new, err)
	}
	return p, nil
}

// ProofsAt returns the inclusion proof of each committed record in the
// checkpoint cp of size leaves (CheckpointAt's, with the cosignatures it
// gathered): every record must be a leaf of that tree.
func (t *Checkpointer) ProofsAt(ctx context.Context, recs []audit.Record, size int64, cp []byte) ([]Proof, error) {
	out := make([]Proof, len(recs))
	for i, r := range recs {
		if r.Seq > size {
			return nil, fmt.Errorf("transparency log: record %d is not in the checkpoint of %d leaves", r.Seq, size)
		}
		p, err := prove(NewEntry(r, r.Hosts).Marshal(), r.Seq-1, size, cp, t.reader(ctx))
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}
