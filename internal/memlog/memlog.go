// Package memlog is an in-memory transparency log for tests: it appends
// entries the way cardsignd's store does (transparency.AppendHashes), signs
// checkpoints with a real log key, serves itself through
// tlogserve.NewHandler, and can be made to misbehave — fork, roll back,
// tamper with a stored hash, an entry or the checkpoint — so that tests can
// check that clients, monitors and audit verify catch it.
package memlog

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"

	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/tlogserve"
	"golang.org/x/mod/sumdb/tlog"
)

// Log is an in-memory log. It implements tlogserve.Source.
type Log struct {
	signer *transparency.Signer

	mu      sync.Mutex
	entries [][]byte
	hashes  map[int64]tlog.Hash // tlog storage index → hash
	size    int64               // the served checkpoint's size
	cp      []byte              // the served checkpoint
}

var _ tlogserve.Source = (*Log)(nil)

// New returns an empty log of origin signed by keys (Ed25519), serving the
// signed checkpoint of the empty tree.
func New(origin string, keys ...crypto.Signer) (*Log, error) {
	s, err := transparency.NewSigner(origin, keys...)
	if err != nil {
		return nil, err
	}
	l := &Log{signer: s, hashes: map[int64]tlog.Hash{}}
	if err := l.Publish(); err != nil {
		return nil, err
	}
	return l, nil
}

// Signer is the log's checkpoint signer.
func (l *Log) Signer() *transparency.Signer { return l.signer }

// Append adds entries as the next leaves and publishes the new checkpoint.
func (l *Log) Append(entries ...[]byte) error {
	l.mu.Lock()
	first := int64(len(l.entries))
	hs, err := transparency.AppendHashes(first, entries, l.reader())
	if err == nil {
		for _, h := range hs {
			l.hashes[h.Index] = h.Hash
		}
		for _, e := range entries {
			l.entries = append(l.entries, bytes.Clone(e))
		}
	}
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return l.Publish()
}

// Publish signs and serves the checkpoint of every leaf stored, its root
// computed from the stored hashes (tampered ones included, as a store
// would).
func (l *Log) Publish() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.publish(int64(len(l.entries)))
}

// RollBack serves a freshly signed checkpoint of the first size leaves: the
// view of a log that went back.
func (l *Log) RollBack(size int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if size < 0 || size > int64(len(l.entries)) {
		return fmt.Errorf("memlog: roll back to %d of %d leaves", size, len(l.entries))
	}
	return l.publish(size)
}

func (l *Log) publish(size int64) error {
	root, err := tlog.TreeHash(size, l.reader())
	if err != nil {
		return err
	}
	cp, err := l.signer.Sign(size, root)
	if err != nil {
		return err
	}
	l.size, l.cp = size, cp
	return nil
}

// Truncate drops the leaves from size on and publishes the checkpoint of
// the rest: with Fork, a log that rewrote its history from leaf size.
func (l *Log) Truncate(size int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if size < 0 || size > int64(len(l.entries)) {
		return fmt.Errorf("memlog: truncate to %d of %d leaves", size, len(l.entries))
	}
	l.entries = l.entries[:size:size]
	// Every hash of the first size leaves is stored below the first one
	// of leaf size.
	maps.DeleteFunc(l.hashes, func(i int64, _ tlog.Hash) bool { return i >= tlog.StoredHashIndex(0, size) })
	return l.publish(size)
}

// Fork returns a copy of the log signed by the same keys: what is appended
// to one afterwards is not in the other, as in a log that shows different
// trees to different clients.
func (l *Log) Fork() *Log {
	l.mu.Lock()
	defer l.mu.Unlock()
	return &Log{signer: l.signer, entries: slices.Clone(l.entries), hashes: maps.Clone(l.hashes), size: l.size, cp: l.cp}
}

// SetEntry replaces the stored entry of leaf i, leaving the tree alone: a
// tampered entry.
func (l *Log) SetEntry(i int64, entry []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries[i] = bytes.Clone(entry)
}

// SetHash replaces the stored hash at tlog storage index i: a tampered
// tile. The served checkpoint is unchanged until the next Publish or
// Append, which signs a root computed over it.
func (l *Log) SetHash(i int64, h tlog.Hash) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hashes[i] = h
}

// SetCheckpoint serves cp, claiming size leaves: a tampered or foreign
// checkpoint.
func (l *Log) SetCheckpoint(size int64, cp []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.size, l.cp = size, bytes.Clone(cp)
}

// Len is the number of leaves stored.
func (l *Log) Len() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.entries))
}

// Handler serves the log through tlogserve.NewHandler.
func (l *Log) Handler() http.Handler { return tlogserve.NewHandler(l, nil) }

// Checkpoint implements tlogserve.Source.
func (l *Log) Checkpoint(ctx context.Context) (int64, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size, bytes.Clone(l.cp), nil
}

// Size implements tlogserve.Source: the size of the tree served.
func (l *Log) Size(ctx context.Context) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size, nil
}

// ReadHashes implements tlogserve.Source.
func (l *Log) ReadHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reader().ReadHashes(indexes)
}

// Entries implements tlogserve.Source.
func (l *Log) Entries(ctx context.Context, from, to int64) ([][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if from < 0 || from > to || to > int64(len(l.entries)) {
		return nil, fmt.Errorf("memlog: entries %d to %d of %d", from, to, len(l.entries))
	}
	out := make([][]byte, 0, to-from)
	for _, e := range l.entries[from:to] {
		out = append(out, bytes.Clone(e))
	}
	return out, nil
}

// reader reads stored hashes; l.mu must be held.
func (l *Log) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, x := range indexes {
			h, ok := l.hashes[x]
			if !ok {
				return nil, errors.New("memlog: no hash stored at index " + fmt.Sprint(x))
			}
			out[i] = h
		}
		return out, nil
	})
}
