package transparency_test

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/transparency"
)

// keysStore is a KeysStore in memory; its first raceFirst RecordKeys
// calls fail as if another replica had written first.
type keysStore struct {
	rec       transparency.KeysRecord
	found     bool
	raceFirst int
	writes    int
}

func (s *keysStore) ReadKeys(context.Context) (transparency.KeysRecord, bool, error) {
	return s.rec, s.found, nil
}

func (s *keysStore) RecordKeys(_ context.Context, rec transparency.KeysRecord) error {
	if s.raceFirst > 0 {
		s.raceFirst--
		return fmt.Errorf("lease held: %w", transparency.ErrKeysRaced)
	}
	s.rec, s.found = rec, true
	s.writes++
	return nil
}

// logSigner returns a Signer of origin whose keys are made from seeds.
func logSigner(t *testing.T, origin string, seeds ...byte) *transparency.Signer {
	t.Helper()
	keys := make([]crypto.Signer, len(seeds))
	for i, b := range seeds {
		keys[i] = ed25519.NewKeyFromSeed(append(make([]byte, ed25519.SeedSize-1), b))
	}
	s, err := transparency.NewSigner(origin, keys...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCheckSharedKeys: the first replica records its keys; one sharing a
// key (a rotation) records its own; one sharing none is refused and
// records nothing; a new origin is accepted; a race is retried.
func TestCheckSharedKeys(t *testing.T) {
	ctx := t.Context()
	log := slog.New(slog.DiscardHandler)
	st := &keysStore{}
	first := logSigner(t, "cardsign.test/log", 1)
	if err := transparency.CheckSharedKeys(ctx, st, first, log); err != nil || st.writes != 1 || st.rec.Seq != 1 {
		t.Fatalf("first replica: %v, %d writes, seq %d", err, st.writes, st.rec.Seq)
	}
	if !strings.HasPrefix(string(st.rec.Body), "cardsign.test/log\ncardsign.test/log+") {
		t.Fatalf("record %q: want the origin, then the keys", st.rec.Body)
	}
	if err := transparency.CheckSharedKeys(ctx, st, first, log); err != nil || st.writes != 1 {
		t.Fatalf("same keys again: %v, %d writes (want none more)", err, st.writes)
	}
	rotating := logSigner(t, "cardsign.test/log", 2, 1)
	if err := transparency.CheckSharedKeys(ctx, st, rotating, log); err != nil || st.writes != 2 || st.rec.Seq != 2 {
		t.Fatalf("a rotation (old and new key): %v, %d writes, seq %d", err, st.writes, st.rec.Seq)
	}
	stranger := logSigner(t, "cardsign.test/log", 3)
	err := transparency.CheckSharedKeys(ctx, st, stranger, log)
	if err == nil || !strings.Contains(err.Error(), "none of this replica's keys") || st.writes != 2 {
		t.Fatalf("no key shared: %v, %d writes", err, st.writes)
	}
	if _, _, err := transparency.CompareKeysRecord(st.rec, stranger, log); err == nil {
		t.Fatal("CompareKeysRecord accepted keys sharing none")
	}
	newLog := logSigner(t, "cardsign.test/other-log", 3)
	st.raceFirst = 2
	if err := transparency.CheckSharedKeys(ctx, st, newLog, log); err != nil || st.writes != 3 {
		t.Fatalf("a new origin after two races: %v, %d writes", err, st.writes)
	}
	st.raceFirst = 10
	if err := transparency.CheckSharedKeys(ctx, st, first, log); !errors.Is(err, transparency.ErrKeysRaced) {
		t.Fatalf("racing every time: %v, want ErrKeysRaced after the last attempt", err)
	}
}
