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
