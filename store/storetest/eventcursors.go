package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/store"
)

// testEventCursors checks the event sinks' cursors: absent until the first
// advance, moved only under a held lease, never back, and shared by every
// handle.
func testEventCursors(t *testing.T, open Opener) {
	s1, s2 := mustOpen(t, open), mustOpen(t, open)
	ctx := t.Context()
	if _, err := s1.EventCursor(ctx, "siem"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cursor of a sink that never delivered: %v, want ErrNotFound", err)
	}
	l, err := s1.AcquireLease(ctx, "duties", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int64{0, 3, 3, 7} {
		if err := s1.AdvanceEventCursor(ctx, l, "siem", seq); err != nil {
			t.Fatalf("advance to %d: %v", seq, err)
		}
	}
	c, err := s2.EventCursor(ctx, "siem")
	if err != nil || c.Seq != 7 || c.Sink != "siem" || c.UpdatedAt.IsZero() {
		t.Fatalf("cursor read on another handle: %+v, %v; want siem at 7 with its time", c, err)
	}
	if err := s2.AdvanceEventCursor(ctx, l, "siem", 6); !errors.Is(err, store.ErrStaleCursor) {
		t.Fatalf("moving the cursor back: %v, want ErrStaleCursor", err)
	}
	// A lease taken anew (another epoch) fences the old holder out.
	if err := s1.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	l2, err := s2.AcquireLease(ctx, "duties", "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.AdvanceEventCursor(ctx, l, "siem", 9); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("advance under a lost lease: %v, want ErrLeaseLost", err)
	}
	if err := s2.AdvanceEventCursor(ctx, l2, "file", 2); err != nil {
		t.Fatal(err)
	}
	if err := s2.AdvanceEventCursor(ctx, l2, "", 2); err == nil {
		t.Fatal("an empty sink name was accepted")
	}
	if err := s2.AdvanceEventCursor(ctx, l2, "siem", -1); err == nil {
		t.Fatal("a negative seq was accepted")
	}
	all, err := s1.EventCursors(ctx)
	if err != nil || len(all) != 2 || all[0].Sink != "file" || all[0].Seq != 2 || all[1].Sink != "siem" || all[1].Seq != 7 {
		t.Fatalf("every cursor: %+v, %v; want file at 2, siem at 7", all, err)
	}
	// Two handles advancing one cursor at once: it ends at the highest,
	// and never goes back.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := []store.Store{s1, s2}[i%2]
			err := s.AdvanceEventCursor(ctx, l2, "race", int64(10+i))
			if err != nil && !errors.Is(err, store.ErrStaleCursor) {
				t.Errorf("advance to %d: %v", 10+i, err)
			}
		}()
	}
	wg.Wait()
	if c, err := s1.EventCursor(ctx, "race"); err != nil || c.Seq != 17 {
		t.Fatalf("after the race: %+v, %v; want 17", c, err)
	}
}
