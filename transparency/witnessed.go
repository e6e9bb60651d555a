package transparency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cardsign/cardsign/audit"
)

// CosignatureReader reads the witnesses' stored cosignatures
// (store.Cosignatures): largest size first, sizes from and up.
type CosignatureReader interface {
	Cosignatures(ctx context.Context, from int64, limit int) ([]Cosignature, error)
}

// Witnessed is the log as its witnesses vouch for it: the newest checkpoint
// that carries a quorum of cosignatures (read from the store, where the
// replica that asks the witnesses puts them), and proofs in it. Every
// replica has one; only the reads are shared, through the store.
type Witnessed struct {
	cp     *Checkpointer
	st     CosignatureReader
	policy WitnessPolicy
	// pollEvery is how stale the newest quorum checkpoint may be when a
	// signer waits for one: one read of the store per pollEvery per
	// process, however many wait.
	pollEvery time.Duration

	// verified are the stored cosignatures already checked against the
	// policy (each is checked once, not at every read of its size).
	verified map[Cosignature]bool

	mu      sync.Mutex
	best    witnessedCheckpoint // the newest checkpoint with the quorum
	readAt  time.Time           // when the store was last read
	reading bool                // a read is under way (one at a time)
	changed chan struct{}       // closed when best changes or a read ends
}

// witnessedCheckpoint is a checkpoint of size leaves with its cosignatures.
type witnessedCheckpoint struct {
	size int64
	note []byte
	n    int // the cosignatures read for it
}

// WitnessedPoll is how often a waiting signer's process reads the store
// for new cosignatures (another replica may have stored them).
const WitnessedPoll = 25 * time.Millisecond

// NewWitnessed returns the witnessed view of cp's log, with the
// cosignatures st holds and the quorum policy p.
func NewWitnessed(cp *Checkpointer, st CosignatureReader, p WitnessPolicy) *Witnessed {
	return &Witnessed{cp: cp, st: st, policy: p, pollEvery: WitnessedPoll, changed: make(chan struct{})}
}

// Policy is the quorum policy the view counts cosignatures with.
func (w *Witnessed) Policy() WitnessPolicy { return w.policy }

// Stored says cosignatures of size were stored in this process: the next
// look reads the store at once.
func (w *Witnessed) Stored(int64) {
	w.mu.Lock()
	w.readAt = time.Time{}
	ch := w.changed
	w.changed = make(chan struct{})
	w.mu.Unlock()
	close(ch)
}

// look returns the newest quorum checkpoint known, reading the store when
// what is known is older than maxAge and no other read is under way; wait,
// when non-nil, is closed at the next change.
func (w *Witnessed) look(ctx context.Context, maxAge time.Duration) (witnessedCheckpoint, <-chan struct{}, error) {
	w.mu.Lock()
	if w.reading || time.Since(w.readAt) < maxAge {
		best, ch := w.best, w.changed
		w.mu.Unlock()
		return best, ch, nil
	}
	w.reading = true
	w.mu.Unlock()

	found, err := w.read(ctx, w.best)

	w.mu.Lock()
	w.reading = false
	w.readAt = time.Now() // after a failure too: waiters do not hammer a store that fails

	if found.size > w.best.size || (found.size == w.best.size && found.n > w.best.n) {
		w.best = found
	}
	best, ch := w.best, w.changed
	w.changed = make(chan struct{})
	w.mu.Unlock()
	close(ch) // waiters look again
	return best, w.changedChan(), err
}

func (w *Witnessed) changedChan() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// maxCosignatureRows bounds one read of the store: the newest sizes only.
const maxCosignatureRows = 256

// read finds the newest size from known's up whose stored cosignatures
// meet the quorum, and its cosigned checkpoint; the zero value when none.
// It reads from known's size, not after it, so that a witness that cosigns
// it late (one back from an outage) adds its line to the served
// checkpoint; known is returned as it is when nothing was added.
func (w *Witnessed) read(ctx context.Context, known witnessedCheckpoint) (witnessedCheckpoint, error) {
	cs, err := w.st.Cosignatures(ctx, known.size, maxCosignatureRows)
	if err != nil {
		return witnessedCheckpoint{}, fmt.Errorf("transparency log: witnesses' cosignatures: %w", err)
	}
	for len(cs) > 0 {
		size := cs[0].Size
		n := 0
		for n < len(cs) && cs[n].Size == size {
			n++
		}
		of, rest := cs[:n], cs[n:]
		cs = rest
		if countNamed(w.policy, of) < w.policy.Quorum {
			continue
		}
		if size == known.size && len(of) == known.n {
			return known, nil
		}
		plain, err := w.cp.CheckpointAt(ctx, size)
		if err != nil {
			return witnessedCheckpoint{}, err
		}
		good := w.valid(plain, of)
		if countNamed(w.policy, good) < w.policy.Quorum {
			// Stored but not valid for this policy (another replica's
			// configuration, a key changed): an older size may do.
			continue
		}
		note, err := w.cosigned(plain, size, good)
		if err != nil {
			return witnessedCheckpoint{}, err
		}
		return witnessedCheckpoint{size: size, note: note, n: len(of)}, nil
	}
	return witnessedCheckpoint{}, nil
}

// maxVerified bounds the verified cache: a few rounds of every witness.
const maxVerified = 4096

// valid returns the cosignatures of cs that verify on the log's checkpoint
// plain, verifying only those not verified before. It runs under the read
// (one at a time).
func (w *Witnessed) valid(plain []byte, cs []Cosignature) []Cosignature {
	if w.verified == nil || len(w.verified) > maxVerified {
		w.verified = map[Cosignature]bool{}
	}
	var good []Cosignature
	for _, c := range cs {
		ok, seen := w.verified[c]
		if !seen {
			one, err := AddCosignatures(plain, []Cosignature{c})
			ok = err == nil && len(w.policy.Vouches(one)) == 1
			w.verified[c] = ok
		}
		if ok {
			good = append(good, c)
		}
	}
	return good
}

// countNamed counts the witnesses of p among cs.
func countNamed(p WitnessPolicy, cs []Cosignature) int {
	n := 0
	for _, wt := range p.Witnesses {
		for _, c := range cs {
			if c.Witness == wt.Name {
				n++
				break
			}
		}
	}
	return n
}

// cosigned is the log's checkpoint note of size leaves with the
// cosignatures of cs by the policy's witnesses, in policy order.
func (w *Witnessed) cosigned(note []byte, size int64, cs []Cosignature) ([]byte, error) {
	var ordered []Cosignature
	for _, wt := range w.policy.Witnesses {
		for _, c := range cs {
			if c.Witness == wt.Name && c.Size == size {
				ordered = append(ordered, c)
			}
		}
	}
	return AddCosignatures(note, ordered)
}

// ErrNotWitnessed: no checkpoint of the log carries the witnesses' quorum
// yet (a log whose witnesses have not answered since they were configured).
var ErrNotWitnessed = errors.New("no checkpoint of the log carries the witnesses' quorum yet: the witnesses have not cosigned one (see the daemon's log and /readyz); try again later")

// Checkpoint is what /log/checkpoint serves: the newest checkpoint a quorum
// of witnesses cosigned, read from the store at every request, so that
// replicas behind one load balancer serve the same one and it never goes
// back (the store keeps the newest quorum size; pruning only drops older
// ones). It can lag the tree by a witness round: a client holding a newer
// checkpoint (from a proof) still reads its tiles, which are served for
// the whole tree. Before the first quorum it fails with ErrNotWitnessed
// rather than serve an unwitnessed checkpoint the first witnessed one
// would then seem to roll back.
func (w *Witnessed) Checkpoint(ctx context.Context) (int64, []byte, error) {
	best, _, err := w.look(ctx, 0)
	if best.size > 0 {
		// After a failed read too: the last one read is still the newest
		// this process knows.
		return best.size, best.note, nil
	}
	if err != nil {
		return 0, nil, err
	}
	return 0, nil, ErrNotWitnessed
}

// Size, ReadHashes and Entries are the tree's (Source).
func (w *Witnessed) Size(ctx context.Context) (int64, error) { return w.cp.Size(ctx) }

// ReadHashes returns the tree hashes stored at indexes (Source).
func (w *Witnessed) ReadHashes(ctx context.Context, indexes []int64) ([]Hash, error) {
	return w.cp.ReadHashes(ctx, indexes)
}

// Entries returns the encoded entries of leaves from to to-1 (Source).
func (w *Witnessed) Entries(ctx context.Context, from, to int64) ([][]byte, error) {
	return w.cp.Entries(ctx, from, to)
}

// Proofs returns the inclusion proof of each committed record in the
// newest checkpoint that a quorum of witnesses cosigned and that includes
// them all, waiting until deadline for one (a zero deadline: not waiting).
// witnessed is false when none came in time (or the stored cosignatures
// could not be read): the proofs are then in the log's newest checkpoint,
// without cosignatures.
func (w *Witnessed) Proofs(ctx context.Context, recs []audit.Record, deadline time.Time) (proofs []Proof, witnessed bool, err error) {
	var top int64
	for _, r := range recs {
		top = max(top, r.Seq)
	}
	for {
		best, changed, err := w.look(ctx, w.pollEvery)
		if err != nil {
			// The cosignatures cannot be read now: the signature is
			// committed, so it gets the log's own checkpoint rather than
			// an error (the caller's wait mode decides what that means).
			break
		}
		if best.size >= top {
			ps, err := w.cp.ProofsAt(ctx, recs, best.size, best.note)
			return ps, err == nil, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		t := time.NewTimer(min(left, w.pollEvery))
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		}
		t.Stop()
	}
	ps, err := w.cp.Proofs(ctx, recs)
	return ps, false, err
}

// WitnessedSize is the size of the newest checkpoint with the quorum this
// process has read (0: none yet), without reading the store.
func (w *Witnessed) WitnessedSize() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.best.size
}
