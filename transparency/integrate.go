package transparency

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/bits"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cardsign/cardsign/audit"
)

// Tree integration: how the audit records a store appends become leaves of
// the tree it keeps (store.Log), written once for both SQL stores, which
// only read and write the rows (Rows, in their append's transaction).

// CatchUpChunk is how many leaves one transaction of a store's catch-up
// at open appends: records appended before the log existed become leaves a
// chunk at a time, so no transaction holds the append lock for long.
const CatchUpChunk = 1000

// appendRecords returns what AppendAudit stores in the transparency log for
// recs, the records it appends as stored (Seq, PrevHash and Hash set), which become
// leaves first, first+1, ... of a tree of first leaves whose stored hashes r
// reads: each record's encoded entry (NewEntry with its Hosts)
// and the tree hashes the append adds. It sets each record's Hosts to those
// its entry lists (sorted, each once, at most MaxHosts), so
// the records AppendAudit returns are the ones ListAudit reads back.
//
// r is asked once, for the hashes of the tree's complete subtrees
// (appendReads).
func appendRecords(first int64, recs []audit.Record, r tlog.HashReader) (entries [][]byte, hashes []StoredHash, err error) {
	entries, hashes, _, err = Edge{}.Append(first, recs, r)
	return entries, hashes, err
}

// Edge is what an append to a tree reads of it: the hashes at
// appendReads(size), the tree's right edge, for the tree of the audit
// log that ends at record size with hash head. The zero Edge knows
// none.
type Edge struct {
	size   int64
	head   []byte
	hashes map[int64]tlog.Hash // nil: not known
}

// Append is appendRecords reading nothing when e is the edge of the tree recs
// extend (of first leaves, the last of record first, whose hash is
// recs[0].PrevHash), and it also returns the edge of the tree after the
// append. A store that keeps the edge of its last append saves the read on
// the signing hot path, as long as no one else appends. It must keep it
// only once the append committed. The head hash, not the size alone, names
// the tree: a size may come back with other records (an append rolled
// back, a database restored, a failover to a standby that lacked the last
// commits), a record hash never does.
func (e Edge) Append(first int64, recs []audit.Record, r tlog.HashReader) (entries [][]byte, hashes []StoredHash, next Edge, err error) {
	entries = make([][]byte, len(recs))
	for i := range recs {
		rec := &recs[i]
		if want := first + int64(i) + 1; rec.Seq != want {
			return nil, nil, Edge{}, fmt.Errorf("transparency log: audit record %d cannot be leaf %d, which is record %d's", rec.Seq, want-1, want)
		}
		en := NewEntry(*rec, rec.Hosts)
		rec.Hosts = en.Card.Hosts
		entries[i] = en.Marshal()
		if n := len(entries[i]); n > MaxEntryBytes {
			return nil, nil, Edge{}, fmt.Errorf("transparency log: the entry of audit record %d is %d bytes, over the limit of %d", rec.Seq, n, MaxEntryBytes)
		}
	}
	have := e.hashes
	if len(recs) == 0 || e.size != first || !bytes.Equal(e.head, recs[0].PrevHash) || have == nil {
		if have, err = readEdge(first, r); err != nil {
			return nil, nil, Edge{}, fmt.Errorf("transparency log: read the tree of %d leaves: %w", first, err)
		}
	}
	hashes, err = AppendHashes(first, entries, edgeReader{have, r})
	if err != nil {
		return nil, nil, Edge{}, err
	}
	if len(recs) == 0 {
		return entries, hashes, Edge{}, nil
	}
	return entries, hashes, nextEdge(first+int64(len(entries)), recs[len(recs)-1].Hash, have, hashes), nil
}

// appendReads are the storage indexes of the stored hashes an append to
// a tree of n leaves reads: those of the complete subtrees the tree is made
// of, largest first (what tlog.TreeHash reads too). Leaf n combines its
// hash with those of its left neighbours only, and every later leaf of the
// same append with those or with hashes the append made.
func appendReads(n int64) []int64 {
	idx := make([]int64, 0, bits.OnesCount64(uint64(n)))
	var start int64
	for level := 62; level >= 0; level-- {
		if size := int64(1) << level; n&size != 0 {
			idx = append(idx, tlog.StoredHashIndex(level, start>>level))
			start += size
		}
	}
	return idx
}

// readEdge reads appendReads(n) from r in one call.
func readEdge(n int64, r tlog.HashReader) (map[int64]tlog.Hash, error) {
	idx := appendReads(n)
	have := make(map[int64]tlog.Hash, len(idx))
	if len(idx) == 0 {
		return have, nil
	}
	hs, err := r.ReadHashes(idx)
	if err != nil {
		return nil, err
	}
	if len(hs) != len(idx) {
		return nil, fmt.Errorf("read %d tree hashes, got %d", len(idx), len(hs))
	}
	for k, i := range idx {
		have[i] = hs[k]
	}
	return have, nil
}

// edgeReader answers from have, and asks r when asked for any other hash.
type edgeReader struct {
	have map[int64]tlog.Hash
	r    tlog.HashReader
}

func (er edgeReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for k, i := range indexes {
		h, ok := er.have[i]
		if !ok {
			return er.r.ReadHashes(indexes)
		}
		out[k] = h
	}
	return out, nil
}

// nextEdge is the edge of a tree of n leaves, the last of audit record n
// with hash head, made by an append that read the edge have and stored
// added: each of its subtrees either was one of the tree before the append
// or was completed by it. The zero Edge (read it again next time)
// should one be neither.
func nextEdge(n int64, head []byte, have map[int64]tlog.Hash, added []StoredHash) Edge {
	idx := appendReads(n)
	next := Edge{size: n, head: bytes.Clone(head), hashes: make(map[int64]tlog.Hash, len(idx))}
	for _, i := range idx {
		if h, ok := have[i]; ok {
			next.hashes[i] = h
			continue
		}
		k := i
		if len(added) > 0 {
			k -= added[0].Index
		}
		if k < 0 || k >= int64(len(added)) || added[k].Index != i {
			return Edge{}
		}
		next.hashes[i] = added[k].Hash
	}
	return next
}

// CheckSize refuses an append when the log's size (its number of
// leaves) is not head, the Seq of the audit head: leaf i must be the entry
// of record i+1, and an append writes both. (A log shorter than the audit
// log is caught up by the append first: records appended by a cardsignd from
// before the log, during a rolling upgrade.)
func CheckSize(size, head int64) error {
	if size == head {
		return nil
	}
	return fmt.Errorf("the transparency log has %d leaves but the audit log %d records: leaves were added outside cardsign "+
		"(an append adds a record's leaf with it, and a cardsignd from before the log leaves records without leaves, which the next append adds); "+
		"run cardsign audit verify --log, and restore the database from a backup", size, head)
}

// catchUpRecords is one transaction of a store's catch-up at open, which makes
// every audit record appended before the transparency log existed a leaf.
// size is the log's size and head the audit head's Seq, both read inside a
// transaction that excludes appends; recs are the records with Seq > size,
// at most CatchUpChunk of them, read in it too. It returns the entries
// and hashes to insert: recs as leaves size, size+1, ..., with no hosts,
// which were not kept before the log. A record missing before head (the
// audit log has a gap) fails: its leaf cannot be made, and the leaves after
// it would be off by one.
func catchUpRecords(size, head int64, recs []audit.Record, r tlog.HashReader) ([][]byte, []StoredHash, error) {
	if size > head {
		return nil, nil, CheckSize(size, head)
	}
	for i := range recs {
		if want := size + int64(i) + 1; recs[i].Seq != want {
			return nil, nil, missingRecord(want)
		}
		recs[i].Hosts = nil
	}
	if len(recs) == 0 && size < head {
		return nil, nil, missingRecord(size + 1)
	}
	return appendRecords(size, recs, r)
}

// CatchUp drives a store's catch-up at open: while the log (size leaves)
// is shorter than the audit log (head records), step runs one transaction
// that reads both again under the append lock, makes up to
// CatchUpChunk records leaves (catchUpRecords), and returns both as it left
// them. Progress goes to log every 10,000 leaves.
func CatchUp(ctx context.Context, log *slog.Logger, size, head int64, step func(context.Context) (size, head int64, err error)) error {
	if size == head {
		return nil
	}
	start := time.Now()
	const msg = "transparency log: adding the audit records appended before it as leaves"
	log.Info(msg, "leaves", size, "records", head)
	for size != head {
		before := size
		n, h, err := step(ctx)
		if err != nil {
			return fmt.Errorf("transparency log: adding the audit records appended before it (%d of %d are leaves): %w", before, head, err)
		}
		size, head = n, h
		if size/10000 != before/10000 {
			log.Info(msg, "leaves", size, "records", head)
		}
	}
	log.Info("transparency log: every audit record is a leaf", "leaves", size, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func missingRecord(seq int64) error {
	return fmt.Errorf("audit record %d is missing (the audit head is past it: records were deleted from the audit log), "+
		"so it cannot become leaf %d of the transparency log: run cardsign audit verify; restore the database from a backup", seq, seq-1)
}

// EntryHosts returns the hosts listed by the encoded entry of audit record
// seq, for ListAudit; a record without a leaf (entry nil) lists none.
//
// It reads the entry as Entry.Marshal writes every entry,
// which is its one encoding: starting with its version and seq, and with
// the member "hosts" (a card's, the only one of that name) where it has
// hosts. Only the hosts are decoded: decoding the whole entry cost more
// than reading its record, on every record listed. An unquoted `,"hosts":`
// cannot stand inside a JSON string, whose quotes are escaped.
func EntryHosts(seq int64, entry []byte) ([]string, error) {
	if entry == nil {
		return nil, nil
	}
	if prefix := fmt.Sprintf(`{"v":%d,"seq":%d,`, EntryVersion, seq); !bytes.HasPrefix(entry, []byte(prefix)) {
		return nil, fmt.Errorf("leaf %d of the transparency log is not the entry of audit record %d (it starts %.40q): "+
			"the database was changed outside cardsign; restore it from a backup", seq-1, seq, entry)
	}
	const member = `,"hosts":`
	i := bytes.Index(entry, []byte(member))
	if i < 0 {
		return nil, nil
	}
	var hosts []string
	if err := json.NewDecoder(bytes.NewReader(entry[i+len(member):])).Decode(&hosts); err != nil {
		return nil, fmt.Errorf("leaf %d of the transparency log: hosts: %v: the database was changed outside cardsign; "+
			"restore it from a backup", seq-1, err)
	}
	return hosts, nil
}

// EntrySealed reads back the commitments a sealed entry (a private agent's)
// shows instead of record seq's caller and card name: nil for an entry
// that is not sealed. With EntryHosts, it gives ListAudit records from which
// NewEntry makes their entries again, byte for byte.
func EntrySealed(seq int64, entry []byte) (*audit.Sealed, error) {
	if !bytes.Contains(entry, []byte(`"caller":"`+SealedPrefix)) {
		return nil, nil
	}
	e, err := ParseEntry(entry)
	if err != nil {
		return nil, fmt.Errorf("leaf %d of the transparency log: %v: the database was changed outside cardsign; restore it from a backup", seq-1, err)
	}
	if !e.Sealed() {
		return nil, nil
	}
	return &audit.Sealed{Caller: e.Caller, CardName: e.Card.Name}, nil
}
