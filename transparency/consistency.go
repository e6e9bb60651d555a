package transparency

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// AlarmKind names what a consistency check caught.
type AlarmKind string

// The alarms. Each is evidence that the log is not append-only as its key
// promises (or that someone in between serves another log): the two signed
// checkpoints involved are the proof to show.
const (
	// AlarmFork: two checkpoints of the same size with different roots.
	AlarmFork AlarmKind = "fork"
	// AlarmInconsistent: the newer tree does not extend the older one (the
	// consistency proof fails): a fork at different sizes.
	AlarmInconsistent AlarmKind = "inconsistent"
	// AlarmRollback: the newer checkpoint has fewer leaves than the older.
	AlarmRollback AlarmKind = "rollback"
	// AlarmOrigin: the checkpoints name different logs.
	AlarmOrigin AlarmKind = "origin-change"
	// AlarmTampered: the log served tiles or entries that its own signed
	// checkpoint contradicts (a *TamperError).
	AlarmTampered AlarmKind = "tampered"
	// AlarmBadEntry: an authenticated leaf that is not a valid entry of its
	// index: the log committed to something cardsign never writes.
	AlarmBadEntry AlarmKind = "bad-entry"
)

// AlarmError is a check that caught the log misbehaving. Old and New are
// the checkpoints compared (New alone for AlarmTampered and AlarmBadEntry).
type AlarmError struct {
	Kind     AlarmKind
	Old, New Checkpoint
	Detail   string
	Err      error // the underlying failure, if any
}

func (e *AlarmError) Error() string {
	s := string(e.Kind) + ": " + e.Detail
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *AlarmError) Unwrap() error { return e.Err }

// TamperError is data the log served that does not match the signed
// checkpoint it was read against: a tile that does not hash to the root,
// an entry that is not the leaf the tiles hold. The log (or something
// between it and the client) served data its own signature contradicts.
type TamperError struct {
	What string // what failed to authenticate, e.g. "entry of leaf 7"
	Err  error
}

func (e *TamperError) Error() string {
	return fmt.Sprintf("%s does not match the log's signed checkpoint: %v", e.What, e.Err)
}
func (e *TamperError) Unwrap() error { return e.Err }

// TileSource is what Consistent reads a log's tree through (a
// tlogclient.Client): hashes authenticated against a tree's root, failing
// with a *TamperError when the log serves data the root contradicts.
type TileSource interface {
	HashReader(ctx context.Context, tree tlog.Tree) tlog.HashReader
	// String names the log in errors: its URL.
	String() string
}

// Consistent proves that new extends old: same origin, no fewer leaves,
// and old's tree a prefix of new's (a consistency proof from tiles
// authenticated against new's root, checked against old's root). An
// alarm is an *AlarmError; a failure to check (the network, a missing
// tile) is any other error, and says nothing either way.
func Consistent(ctx context.Context, c TileSource, old, new Checkpoint) error {
	switch {
	case old.Origin != new.Origin:
		return &AlarmError{Kind: AlarmOrigin, Old: old, New: new,
			Detail: fmt.Sprintf("the log's origin changed from %q to %q: these checkpoints are of different logs", old.Origin, new.Origin)}
	case new.Size < old.Size:
		return &AlarmError{Kind: AlarmRollback, Old: old, New: new,
			Detail: fmt.Sprintf("the log went back from %d leaves to %d: a log only grows", old.Size, new.Size)}
	case new.Size == old.Size:
		if new.Root != old.Root {
			return &AlarmError{Kind: AlarmFork, Old: old, New: new,
				Detail: fmt.Sprintf("two signed checkpoints of %d leaves with different roots (%s and %s)", old.Size, old.Root, new.Root)}
		}
		return nil
	case old.Size == 0:
		// The empty tree is a prefix of every tree.
		return nil
	}
	proof, err := tlog.ProveTree(new.Size, old.Size, c.HashReader(ctx, new.Tree()))
	if err != nil {
		var te *TamperError
		if errors.As(err, &te) {
			return &AlarmError{Kind: AlarmTampered, Old: old, New: new,
				Detail: fmt.Sprintf("proving tree %d consistent with tree %d", new.Size, old.Size), Err: err}
		}
		return fmt.Errorf("prove tree %d consistent with tree %d from %s: %w", new.Size, old.Size, c, err)
	}
	if err := tlog.CheckTree(proof, new.Size, new.Root, old.Size, old.Root); err != nil {
		return &AlarmError{Kind: AlarmInconsistent, Old: old, New: new,
			Detail: fmt.Sprintf("the tree of %d leaves (root %s) does not extend the tree of %d leaves (root %s): the log forked", new.Size, new.Root, old.Size, old.Root),
			Err:    err}
	}
	return nil
}
