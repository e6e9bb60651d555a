package transparency

import (
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// StoredHash is a tree hash to store at its tlog storage index.
type StoredHash struct {
	Index int64
	Hash  tlog.Hash
}

// AppendHashes returns the hashes to store when entries become leaves
// first, first+1, ... of a tree of first leaves whose stored hashes r reads.
// r is asked only for hashes stored before this append, each at most once.
func AppendHashes(first int64, entries [][]byte, r tlog.HashReader) ([]StoredHash, error) {
	o := &overlay{r: r, m: map[int64]tlog.Hash{}}
	var out []StoredHash
	for i, e := range entries {
		n := first + int64(i)
		hs, err := tlog.StoredHashes(n, e, o)
		if err != nil {
			return nil, fmt.Errorf("transparency: append leaf %d: %w", n, err)
		}
		base := tlog.StoredHashIndex(0, n)
		for j, h := range hs {
			idx := base + int64(j)
			o.m[idx] = h
			out = append(out, StoredHash{Index: idx, Hash: h})
		}
	}
	return out, nil
}

// overlay reads hashes from m first (those this append made, and those
// already read), then from r.
type overlay struct {
	r tlog.HashReader
	m map[int64]tlog.Hash
}

func (o *overlay) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	var missing []int64
	for _, i := range indexes {
		if _, ok := o.m[i]; !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		hs, err := o.r.ReadHashes(missing)
		if err != nil {
			return nil, err
		}
		if len(hs) != len(missing) {
			return nil, fmt.Errorf("read %d tree hashes, got %d", len(missing), len(hs))
		}
		for k, i := range missing {
			o.m[i] = hs[k]
		}
	}
	out := make([]tlog.Hash, len(indexes))
	for k, i := range indexes {
		out[k] = o.m[i]
	}
	return out, nil
}
