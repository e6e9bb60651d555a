package transparency

import (
	"context"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

func TestHashCache(t *testing.T) {
	c := NewHashCache(4)
	loads := 0
	load := func(_ context.Context, idx []int64) ([]tlog.Hash, error) {
		loads++
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = tlog.Hash{byte(x), 9}
		}
		return out, nil
	}
	c.Appending(3)
	c.Add([]StoredHash{{Index: 1, Hash: tlog.Hash{1}}, {Index: 2, Hash: tlog.Hash{2}}})
	hs, err := c.Read(t.Context(), []int64{2, 1, 7}, load)
	if err != nil || hs[0] != (tlog.Hash{2}) || hs[1] != (tlog.Hash{1}) || hs[2] != (tlog.Hash{7, 9}) || loads != 1 {
		t.Fatalf("read %v %v after %d loads", hs, err, loads)
	}
	if _, _ = c.Read(t.Context(), []int64{7}, load); loads != 1 {
		t.Fatal("a hash read once was read again")
	}
	// Full: the older generation goes rather than the cache grow; a hash
	// read meanwhile (7) is kept, one not read since (1) is not.
	c.Add([]StoredHash{{Index: 3}, {Index: 4}})
	if _, _ = c.Read(t.Context(), []int64{7}, load); loads != 1 {
		t.Fatal("a hash read once was read again")
	}
	c.Add([]StoredHash{{Index: 5}, {Index: 6}})
	if n := len(c.cur) + len(c.old); n > 4 {
		t.Fatalf("%d hashes cached, bound 4", n)
	}
	if _, _ = c.Read(t.Context(), []int64{7}, load); loads != 1 {
		t.Fatal("a hash read in every generation was dropped")
	}
	if _, _ = c.Read(t.Context(), []int64{1}, load); loads != 2 {
		t.Fatal("a hash not read for two generations is still cached: the cache grows")
	}
	// The store went back: nothing cached survives.
	c.Add([]StoredHash{{Index: 5, Hash: tlog.Hash{5}}})
	c.Appending(2)
	if len(c.cur)+len(c.old) != 0 {
		t.Fatal("hashes survived the store going back")
	}
}

// memRows is a store's log rows in memory (Rows): a testTree's hashes.
type memRows struct{ testTree }

func (m *memRows) ReadHashes(_ context.Context, indexes []int64) ([]tlog.Hash, error) {
	return m.testTree.ReadHashes(indexes)
}

func (m *memRows) WriteLeaves(_ context.Context, _ int64, _ [][]byte, hashes []StoredHash) error {
	for _, h := range hashes {
		m.hashes[h.Index] = h.Hash
	}
	return nil
}

// TestTailProofsNeverQuery: a process that appends batch after batch and
// proves each new leaf, as the signing path does, finds every hash its
// proofs read in its Tail, however many appends overflow the cache: the
// store is never asked (it used to be, each time the full cache started
// over).
func TestTailProofsNeverQuery(t *testing.T) {
	ctx := t.Context()
	rows := &memRows{testTree{hashes: map[int64]tlog.Hash{}}}
	tail := NewTail(256)
	loads := 0
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		return tail.ReadHashes(ctx, idx, func(ctx context.Context, missing []int64) ([]tlog.Hash, error) {
			loads++
			return rows.ReadHashes(ctx, missing)
		})
	})
	const batch = 27 // records per commit under load (BenchmarkAuthoritySignLog)
	var size int64
	for range 200 { // about 10,000 hashes: 40 times the cache
		recs := logRecords(size, batch)
		tail.Appending(size)
		app, err := tail.Extend(ctx, rows, size, recs, false)
		if err != nil {
			t.Fatal(err)
		}
		tail.Committed(app)
		size += batch
		for i := size - batch; i < size; i++ {
			if _, err := tlog.ProveRecord(size, i, reader); err != nil {
				t.Fatal(err)
			}
		}
	}
	if loads != 0 {
		t.Fatalf("the proofs of new leaves queried the store %d times", loads)
	}
}
