package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
	"golang.org/x/mod/sumdb/tlog"
)

// translog is the authority's side of the transparency log: the store keeps
// the tree (appended with every audit record); translog signs checkpoints
// and proves signatures in them. Checkpoints are signed at most once per
// tree size: every card committed in one audit transaction shares one.
type translog struct {
	signer *transparency.Signer
	store  store.Store

	mu     sync.Mutex // held while a checkpoint is made, so concurrent callers share it
	latest checkpoint
	// size is the largest tree size this process's own audit commits
	// reached: a committed size, known without asking the store.
	size atomic.Int64
}

// committed learns the tree's size from an audit transaction's records,
// before any caller among them asks for its proofs (audit.BatcherOptions):
// they then share one checkpoint, signed for all of them.
func (t *translog) committed(recs []audit.Record) {
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

func newTranslog(s *transparency.Signer, st store.Store) *translog {
	return &translog{signer: s, store: st}
}

// atLeast returns a checkpoint of at least size leaves, signing one for the
// tree as it is now when the latest is smaller.
func (t *translog) atLeast(ctx context.Context, size int64) (checkpoint, error) {
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
func (t *translog) current(ctx context.Context) (checkpoint, error) {
	size, _, err := t.store.AuditHead(ctx)
	if err != nil {
		return checkpoint{}, fmt.Errorf("transparency log: tree size: %w", err)
	}
	return t.atLeast(ctx, size)
}

// signNow signs a checkpoint of the tree's committed size; t.mu is held.
func (t *translog) signNow(ctx context.Context) (checkpoint, error) {
	size, _, err := t.store.AuditHead(ctx)
	if err != nil {
		return checkpoint{}, fmt.Errorf("transparency log: tree size: %w", err)
	}
	return t.sign(ctx, size)
}

// sign signs a checkpoint of the tree of size leaves, all committed; t.mu
// is held.
func (t *translog) sign(ctx context.Context, size int64) (checkpoint, error) {
	if size < t.latest.size {
		// Another replica's view cannot be older than one we signed: the
		// store went back (restored from a backup). Signing the smaller
		// tree would be a rollback every monitor reports.
		return checkpoint{}, fmt.Errorf("transparency log: the store holds %d leaves, fewer than the %d of a checkpoint already signed: was the database restored from a backup?", size, t.latest.size)
	}
	root, err := tlog.TreeHash(size, t.reader(ctx))
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

// proofs returns the inclusion proof of each committed record, in one
// checkpoint.
func (t *translog) proofs(ctx context.Context, recs []audit.Record) ([]transparency.Proof, error) {
	var top int64
	for _, r := range recs {
		top = max(top, r.Seq)
	}
	cp, err := t.atLeast(ctx, top)
	if err != nil {
		return nil, err
	}
	out := make([]transparency.Proof, len(recs))
	for i, r := range recs {
		entry := transparency.NewEntry(r, r.Hosts).Marshal()
		p, err := transparency.Prove(entry, r.Seq-1, cp.size, cp.note, t.reader(ctx))
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// reader reads the tree's stored hashes (the store caches the ones new
// proofs read).
func (t *translog) reader(ctx context.Context) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		return t.store.LogHashes(ctx, indexes)
	})
}

// attachProofs puts each signature's inclusion proof in its unprotected
// header; committed are the signatures' audit records, in order.
func (t *translog) attachProofs(ctx context.Context, res *signer.Result, committed []audit.Record) error {
	if len(committed) != len(res.Signatures) {
		return fmt.Errorf("transparency log: %d audit records for %d signatures", len(committed), len(res.Signatures))
	}
	proofs, err := t.proofs(ctx, committed)
	if err != nil {
		return err
	}
	headers := make([]strictjson.Value, len(proofs))
	for i, p := range proofs {
		headers[i] = strictjson.ObjectValue(strictjson.Member{Key: transparency.HeaderMember, Val: strictjson.StringValue(p.Marshal())})
	}
	return res.SetHeaders(headers)
}

// Checkpoint, ReadHashes and Entries serve the log over HTTP
// (transparency.Source).
func (t *translog) Checkpoint(ctx context.Context) (int64, []byte, error) {
	cp, err := t.current(ctx)
	return cp.size, cp.note, err
}

func (t *translog) Size(ctx context.Context) (int64, error) {
	size, _, err := t.store.AuditHead(ctx)
	return size, err
}

func (t *translog) ReadHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	return t.reader(ctx).ReadHashes(indexes)
}

func (t *translog) Entries(ctx context.Context, from, to int64) ([][]byte, error) {
	return t.store.LogEntries(ctx, from, to)
}
