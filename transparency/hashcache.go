package transparency

import (
	"context"
	"errors"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
)

// DefaultHashCacheSize bounds a HashCache (32-byte hashes; with the map's
// overhead about 100 bytes each). The proofs of an audit transaction of the
// largest batch (512 records, about 1,000 new hashes) read its own hashes
// and about 40 on the tree's right edge. Larger costs memory several times
// over: the daemon runs the collector at GOGC=400.
const DefaultHashCacheSize = 1 << 12

// HashCache holds transparency-log tree hashes this process knows to be
// committed: those its appends wrote, once their transaction committed, and
// those it read. A stored hash never changes, so a cached one is never
// stale, whoever appends next. The inclusion proofs of new leaves read
// hashes their own append just wrote and the tree's right edge, again and
// again: served from here, a proof costs no query.
//
// It keeps two generations of at most half its size each: when the newer
// one is full, the older is dropped and the newer takes its place. A hash
// read from the older generation moves to the newer, so the hashes every
// proof reads (the complete subtrees on the tree's left, written long ago)
// stay cached however many appends come after them, and a full cache does
// not make the next proofs query the store all at once.
type HashCache struct {
	mu       sync.Mutex
	max      int                 // per generation
	cur, old map[int64]tlog.Hash // newer and older generation
	size     int64               // the largest tree size an append of this process saw
}

// Appending tells the cache the tree's size as an append found it. A size
// smaller than one seen before means the store went back (restored from a
// backup, or a failover that lost commits): hashes cached past it may be
// rewritten with others, so the cache starts over.
func (c *HashCache) Appending(size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if size < c.size {
		clear(c.cur)
		clear(c.old)
	}
	c.size = size
}

// NewHashCache returns a cache of at most size hashes (<= 0:
// DefaultHashCacheSize).
func NewHashCache(size int) *HashCache {
	if size <= 0 {
		size = DefaultHashCacheSize
	}
	gen := max(size/2, 1)
	return &HashCache{max: gen, cur: make(map[int64]tlog.Hash, gen), old: make(map[int64]tlog.Hash, gen)}
}

// Add caches hashes of a committed append.
func (c *HashCache) Add(hs []StoredHash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		c.put(h.Index, h.Hash)
	}
}

// put caches one hash in the newer generation, turning the generations
// over when it is full; c.mu is held.
func (c *HashCache) put(idx int64, h tlog.Hash) {
	if _, ok := c.cur[idx]; !ok && len(c.cur) >= c.max {
		c.old, c.cur = c.cur, c.old
		clear(c.cur)
	}
	c.cur[idx] = h
}

// Read returns the hashes at indexes, reading those not cached with load
// (one call, for the missing ones only) and caching them.
func (c *HashCache) Read(ctx context.Context, indexes []int64, load func(context.Context, []int64) ([]tlog.Hash, error)) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	var missing []int64
	var at []int
	c.mu.Lock()
	for i, idx := range indexes {
		if h, ok := c.cur[idx]; ok {
			out[i] = h
		} else if h, ok := c.old[idx]; ok {
			out[i] = h
			c.put(idx, h)
		} else {
			missing = append(missing, idx)
			at = append(at, i)
		}
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	hs, err := load(ctx, missing)
	if err != nil {
		return nil, err
	}
	if len(hs) != len(missing) {
		return nil, errors.New("transparency log: the store returned the wrong number of tree hashes")
	}
	c.mu.Lock()
	for k, h := range hs {
		out[at[k]] = h
		c.put(missing[k], h)
	}
	c.mu.Unlock()
	return out, nil
}
