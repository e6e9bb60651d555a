package transparency

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cardsign/cardsign/audit"
)

// AuditChecker checks a served transparency log against the audit records
// as a verifier of the audit chain (cardsign audit verify) walks them: record seq's entry (leaf seq-1) must be exactly
// NewEntry of the record (with the hosts the entry lists: the
// hash chain does not cover them); the tree rebuilt from the entries must
// have the root the log's checkpoint signs; and every hash the log serves
// in its tiles must be the one the rebuilt tree has there. The tree is a
// compact range (a hash per level), fed the leaf hashes in order, whose
// visitor sees every complete subtree's hash, and so every hash a tile
// holds. The checker holds one entry bundle and one hash tile per level:
// constant memory, whatever the size of the log.
type AuditChecker struct {
	c       TileFetcher
	cp      Checkpoint
	timeout time.Duration

	bundleN int64 // the bundle held, -1 for none
	bundle  [][]byte
	tiles   [64 / TileHeight]heldTile // by tile level
	rng     *compact.Range
	leaves  int64 // entries checked and added to rng
	err     error // the first failure the range's visitor met
}

type heldTile struct {
	t    tlog.Tile
	data []byte // nil: none held
}

// MismatchError is a difference between the log and the audit records: the
// answer is no, as a broken chain is. Other errors of an AuditChecker are
// failures to check.
type MismatchError struct {
	Seq int64 // the record, 0 when the difference is not one record's
	Msg string
}

func (m *MismatchError) Error() string { return m.Msg }

// TileFetcher is what an AuditChecker reads the log through (a
// tlogclient.Client): entry bundles and hash tiles as served, which the
// checker authenticates itself.
type TileFetcher interface {
	EntryBundle(ctx context.Context, t tlog.Tile) ([][]byte, error)
	TileReader(ctx context.Context) tlog.TileReader
}

// NewAuditChecker returns a checker of the log c serves against its
// verified checkpoint cp; each read has timeout.
func NewAuditChecker(c TileFetcher, cp Checkpoint, timeout time.Duration) *AuditChecker {
	f := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	return &AuditChecker{c: c, cp: cp, timeout: timeout, bundleN: -1, rng: f.NewEmptyRange(0)}
}

// Checkpoint is the checkpoint the log is checked against.
func (lc *AuditChecker) Checkpoint() Checkpoint { return lc.cp }

// Add checks record r, the next of the walk (the chain verifier has
// checked its seq follows the previous one).
func (lc *AuditChecker) Add(ctx context.Context, r audit.Record) error {
	leaf := r.Seq - 1
	if leaf >= lc.cp.Size {
		return nil // appended after the checkpoint
	}
	if leaf != lc.leaves {
		return &MismatchError{Seq: r.Seq, Msg: fmt.Sprintf("record %d comes after %d records checked against the log", r.Seq, lc.leaves)}
	}
	if n := leaf / TileWidth; n != lc.bundleN {
		t := TileFor(EntriesLevel, n, lc.cp.Size)
		cctx, cancel := context.WithTimeout(ctx, lc.timeout)
		entries, err := lc.c.EntryBundle(cctx, t)
		cancel()
		if err != nil {
			return err
		}
		lc.bundleN, lc.bundle = n, entries
	}
	got := lc.bundle[leaf%TileWidth]
	e, err := ParseEntry(got)
	if err != nil {
		return &MismatchError{Seq: r.Seq, Msg: fmt.Sprintf("its log entry (leaf %d) is not a valid entry: %v", leaf, err)}
	}
	if e.Sealed() {
		// A private agent's entry: its caller, card name and hosts are
		// commitments the auditor cannot open (its owner can, with the
		// agent's salt); every other member is checked.
		r.Sealed = &audit.Sealed{Caller: e.Caller, CardName: e.Card.Name}
	}
	want := NewEntry(r, e.Card.Hosts)
	if !bytes.Equal(want.Marshal(), got) {
		return &MismatchError{Seq: r.Seq, Msg: fmt.Sprintf("its log entry (leaf %d) differs from the record: %s", leaf, entryDiff(want, e))}
	}
	h := LeafHash(got)
	// The visitor sees the leaf and every subtree it completes; those at
	// tile levels are checked against the log's tiles.
	if err := lc.rng.Append(h[:], func(id compact.NodeID, hash []byte) {
		if lc.err == nil && id.Level%TileHeight == 0 {
			lc.err = lc.checkTileHash(ctx, r.Seq, int(id.Level)/TileHeight, int64(id.Index), hash)
		}
	}); err != nil {
		return err
	}
	if lc.err != nil {
		return lc.err
	}
	lc.leaves++
	return nil
}

// checkTileHash checks that the log's hash tile of level k holds hash at
// index i of its level (tree level 8k), fetching the tile when it is not
// the one held.
func (lc *AuditChecker) checkTileHash(ctx context.Context, seq int64, k int, i int64, hash []byte) error {
	held := &lc.tiles[k]
	if n := i / TileWidth; held.data == nil || held.t.N != n {
		t := TileFor(k, n, lc.cp.Size)
		cctx, cancel := context.WithTimeout(ctx, lc.timeout)
		data, err := lc.c.TileReader(cctx).ReadTiles([]tlog.Tile{t})
		cancel()
		if err != nil {
			return err
		}
		held.t, held.data = t, data[0]
	}
	at := (i % TileWidth) * tlog.HashSize
	if served := held.data[at : at+tlog.HashSize]; !bytes.Equal(served, hash) {
		what := fmt.Sprintf("the hash of leaf %d", i)
		if k > 0 {
			what = fmt.Sprintf("the hash of leaves %d to %d", i<<(k*TileHeight), (i+1)<<(k*TileHeight)-1)
		}
		return &MismatchError{Seq: seq, Msg: fmt.Sprintf("the log's tile %s serves %s as %s, but the entries hash to %s: a stored tree hash (or an entry's hosts) was changed",
			TilePath(held.t), what, tlog.Hash(served), tlog.Hash(hash))}
	}
	return nil
}

// Finish checks, after records were walked, that they covered the
// checkpoint and that the entries hash to its root.
func (lc *AuditChecker) Finish(records int64) error {
	if lc.leaves < lc.cp.Size {
		return &MismatchError{Msg: fmt.Sprintf("the log's checkpoint covers %d leaves but the audit log has %d records: records were removed, or the log holds leaves no record explains", lc.cp.Size, records)}
	}
	if lc.cp.Size == 0 {
		// An empty tree's root is tlog's zero hash or RFC 6962's hash of
		// nothing; anything else is a checkpoint of some other tree.
		if lc.cp.Root == (tlog.Hash{}) || lc.cp.Root == tlog.Hash(rfc6962.DefaultHasher.EmptyRoot()) {
			return nil
		}
		return &MismatchError{Msg: fmt.Sprintf("the log's signed checkpoint of 0 leaves has root %s, not the empty tree's", lc.cp.Root)}
	}
	b, err := lc.rng.GetRootHash(nil)
	if err != nil {
		return err
	}
	root := tlog.Hash(b)
	if root != lc.cp.Root {
		return &MismatchError{Msg: fmt.Sprintf("the log's entries for records 1 to %d hash to root %s, but its signed checkpoint of %d leaves says %s: "+
			"a stored tree hash was changed, or the checkpoint was signed over other entries", lc.cp.Size, root, lc.cp.Size, lc.cp.Root)}
	}
	return nil
}

// entryDiff names the members in which the entry the record makes (want)
// and the log's (got) differ.
func entryDiff(want, got Entry) string {
	var diffs []string
	cmp := func(name string, w, g any) {
		if fmt.Sprint(w) != fmt.Sprint(g) {
			diffs = append(diffs, fmt.Sprintf("%s %q in the log, %q in the record", name, fmt.Sprint(g), fmt.Sprint(w)))
		}
	}
	cmp("v", want.V, got.V)
	cmp("seq", want.Seq, got.Seq)
	cmp("time", want.Time, got.Time)
	cmp("outcome", want.Outcome, got.Outcome)
	cmp("caller", want.Caller, got.Caller)
	cmp("card name", want.Card.Name, got.Card.Name)
	cmp("card version", want.Card.Version, got.Card.Version)
	cmp("card sha256", want.Card.SHA256, got.Card.SHA256)
	cmp("kid", want.KID, got.KID)
	cmp("alg", want.Alg, got.Alg)
	cmp("profile", want.Profile, got.Profile)
	cmp("signature", want.Signature, got.Signature)
	cmp("record hash", want.Record, got.Record)
	if len(diffs) == 0 {
		return "the bytes differ"
	}
	return strings.Join(diffs, "; ")
}
