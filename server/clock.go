package server

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/store"
)

// clock is the store's clock as this process sees it: the local clock plus
// an offset measured against store.Now. Replicas compare the times they
// take (a key's activation, a revocation, the audit log's order), so they
// take them from one clock, the database's; a replica whose host clock is
// off by 30 s still activates a rotated key when the others do.
type clock struct {
	store store.Store
	// skew is added to the host clock; it stands for a host whose clock is
	// wrong, for tests (Config.ClockSkew).
	skew   time.Duration
	offset atomic.Int64 // store clock minus (host clock + skew), nanoseconds
}

func newClock(st store.Store, skew time.Duration) *clock {
	return &clock{store: st, skew: skew}
}

// now is the store's time, as of the last sync.
func (c *clock) now() time.Time {
	return time.Now().Add(c.skew + time.Duration(c.offset.Load())).UTC()
}

// sync measures the offset: the store's time is taken to be read half way
// through the round trip.
func (c *clock) sync(ctx context.Context) error {
	before := time.Now().Add(c.skew)
	db, err := c.store.Now(ctx)
	if err != nil {
		return err
	}
	rtt := time.Since(before.Add(-c.skew))
	c.offset.Store(int64(db.Sub(before.Add(rtt / 2))))
	return nil
}
