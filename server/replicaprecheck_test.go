package server

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/cardsign/cardsign/store"
)

// PrecheckReplica, reading only: no lease or a lapsed one passes, a lease
// that lapses while it watches passes (a killed holder), one renewed by
// its holder meanwhile refuses with ClaimReplica's error.
func TestPrecheckReplica(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	held := store.Lease{Name: "replica/r1", Holder: "other/1/abc", Epoch: 3, Expires: now.Add(10 * time.Second)}
	lapsed := held
	lapsed.Expires = now.Add(-time.Second)
	renewed := held
	renewed.Expires = now.Add(20 * time.Second)
	for _, c := range []struct {
		name    string
		reads   []store.Lease // zero Lease: none found
		refused bool
	}{
		{"none", []store.Lease{{}}, false},
		{"lapsed", []store.Lease{lapsed}, false},
		{"lapses while watched", []store.Lease{held, held, lapsed}, false},
		{"renewed while watched", []store.Lease{held, held, renewed}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			i := 0
			read := func(ctx context.Context, name string) (store.Lease, bool, time.Time, error) {
				if name != "replica/r1" || i >= len(c.reads) {
					t.Fatalf("read %q (read %d of %d)", name, i+1, len(c.reads))
				}
				l := c.reads[i]
				i++
				return l, l.Holder != "", now, nil
			}
			err := PrecheckReplica(t.Context(), "r1", read, slog.New(slog.DiscardHandler))
			var inUse *ReplicaNameInUseError
			if got := errors.As(err, &inUse); got != c.refused || (!c.refused && err != nil) {
				t.Fatalf("PrecheckReplica: %v, want refused %v", err, c.refused)
			}
			if c.refused && (inUse.Name != "r1" || inUse.Instance != held.Holder || !inUse.Until.Equal(renewed.Expires)) {
				t.Errorf("refusal %+v", inUse)
			}
			if i != len(c.reads) {
				t.Errorf("%d reads, want %d", i, len(c.reads))
			}
		})
	}
	if err := PrecheckReplica(t.Context(), "", nil, nil); err != nil {
		t.Errorf("no configured name: %v", err)
	}
}
