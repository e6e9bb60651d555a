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
	// Full: it starts over rather than grow.
	c.Add([]StoredHash{{Index: 3}, {Index: 4}})
	if len(c.m) > 4 {
		t.Fatalf("%d hashes cached, bound 4", len(c.m))
	}
	// The store went back: nothing cached survives.
	c.Add([]StoredHash{{Index: 5, Hash: tlog.Hash{5}}})
	c.Appending(2)
	if len(c.m) != 0 {
		t.Fatal("hashes survived the store going back")
	}
}
