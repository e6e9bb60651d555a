package transparency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// KeysDocument is the name of the stored document that records the log's
// origin and the verifier keys of the replica that started last, one per
// line after the origin (KeysRecord).
const KeysDocument = "transparency-log-keys"

// KeysRecord is the recorded origin and keys of the replica that started
// last, as KeysDocument holds them.
type KeysRecord struct {
	Seq       int64     // the document's sequence number: 0 when none was recorded
	Body      []byte    // the origin, then a verifier key per line
	UpdatedAt time.Time // when it was recorded; zero: unknown
}

// ErrKeysRaced is wrapped by a KeysStore's RecordKeys when another replica
// recorded its keys at the same time: the check is made again against what
// that one recorded.
var ErrKeysRaced = errors.New("transparency: another replica is recording its log keys")

// KeysStore is where replicas sharing a store record their log keys
// (store.LogKeys keeps them in a store's documents, under a lease).
type KeysStore interface {
	// ReadKeys returns the record, or found false when none was made.
	ReadKeys(ctx context.Context) (rec KeysRecord, found bool, err error)
	// RecordKeys replaces the record with rec, whose Seq is one more than
	// the record read; an error wrapping ErrKeysRaced means another
	// replica wrote first.
	RecordKeys(ctx context.Context, rec KeysRecord) error
}

// CheckSharedKeys refuses to start a replica whose log keys (s) share none
// with the keys the replicas started before it sign with, for the same
// origin: verifiers would then trust one replica's proofs and not the
// other's. During a rotation the replicas list the old and the new key (they
// share one); a new origin (a new log, e.g. after losing the key) is
// accepted with a warning. Then it records its own origin and keys.
func CheckSharedKeys(ctx context.Context, st KeysStore, s *Signer, log *slog.Logger) error {
	// Replicas starting at the same time take turns: the loser of the lease
	// or of the write checks again against what the winner recorded.
	for attempt := 1; ; attempt++ {
		err := checkKeysOnce(ctx, st, s, log)
		if attempt == 5 || !errors.Is(err, ErrKeysRaced) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
}

// checkKeysOnce is one attempt of CheckSharedKeys.
func checkKeysOnce(ctx context.Context, st KeysStore, s *Signer, log *slog.Logger) error {
	seq, same, err := CompareKeys(ctx, st, s, log)
	if err != nil || same {
		return err
	}
	body := strings.Join(append([]string{s.Origin()}, s.SigningKeys()...), "\n") + "\n"
	if err := st.RecordKeys(ctx, KeysRecord{Seq: seq + 1, Body: []byte(body)}); err != nil {
		return fmt.Errorf("log: record this replica's log keys: %w", err)
	}
	return nil
}

// CompareKeys reads, and only reads, the log keys the replica that started
// last recorded: it refuses keys that share none with them under the same
// origin, and reports whether they are the ones recorded (same) and the
// record's sequence number. cardsignd runs it before anything is written,
// then CheckSharedKeys to record them.
func CompareKeys(ctx context.Context, st KeysStore, s *Signer, log *slog.Logger) (seq int64, same bool, err error) {
	rec, found, err := st.ReadKeys(ctx)
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("log: read the keys the other replicas sign with: %w", err)
	case !found:
		return 0, false, nil
	}
	return CompareKeysRecord(rec, s, log)
}

// CompareKeysRecord is CompareKeys over the record, read by the caller
// (cardsignd's precheck reads it before the store is opened).
func CompareKeysRecord(rec KeysRecord, s *Signer, log *slog.Logger) (seq int64, same bool, err error) {
	mine := s.SigningKeys()
	seq = rec.Seq
	lines := strings.Split(strings.TrimSpace(string(rec.Body)), "\n")
	origin, theirs := lines[0], lines[1:]
	when := "at an unknown time"
	if !rec.UpdatedAt.IsZero() {
		when = "at " + rec.UpdatedAt.UTC().Format(time.RFC3339)
	}
	if origin != s.Origin() {
		log.Warn("log.origin differs from the one this store's log was signed under: this starts a new log, and monitors of the old one will report an origin change",
			"origin", s.Origin(), "previous_origin", origin)
	} else if !slices.ContainsFunc(mine, func(k string) bool { return slices.Contains(theirs, k) }) {
		return 0, false, fmt.Errorf("log.keys: the replica that started last (%s) signs the transparency log %s with %s, and none of this replica's keys (%s) is among them: "+
			"replicas sharing a store must sign with the same log key, or verifiers trust some replicas' proofs and not others'; "+
			"install that key here, or, to rotate, list the old key beside the new one on every replica first (a lost key: start a new log under a new log.origin)",
			when, origin, strings.Join(theirs, ", "), strings.Join(mine, ", "))
	}
	if origin == s.Origin() && slices.Equal(theirs, mine) {
		return seq, true, nil
	}
	return seq, false, nil
}
