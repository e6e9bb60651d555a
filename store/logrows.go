package store

import (
	"fmt"

	"github.com/cardsign/cardsign/transparency"
)

// The row helpers both SQL stores use for the transparency log's tables;
// the tree itself is package transparency's.

// LogRows are the rows of (idx, blob) a store's query for entries or
// hashes returns (*sql.Rows, pgx.Rows).
type LogRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanLogRows reads rows by index, for LogHashesFound and LogEntriesFound.
// The caller closes rows.
func ScanLogRows(rows LogRows) (map[int64][]byte, error) {
	found := map[int64][]byte{}
	for rows.Next() {
		var i int64
		var b []byte
		if err := rows.Scan(&i, &b); err != nil {
			return nil, err
		}
		found[i] = b
	}
	return found, rows.Err()
}

// LogHashesFound returns LogHashes' answer for indexes from the rows a
// store read (storage index to hash): an index without a row fails with an
// error wrapping ErrNotFound.
func LogHashesFound(indexes []int64, found map[int64][]byte) ([]transparency.Hash, error) {
	out := make([]transparency.Hash, len(indexes))
	for k, i := range indexes {
		b, ok := found[i]
		if !ok {
			return nil, fmt.Errorf("transparency log: tree hash %d: %w", i, ErrNotFound)
		}
		if len(b) != transparency.HashSize {
			return nil, fmt.Errorf("transparency log: tree hash %d has %d bytes, want %d; restore the database from a backup", i, len(b), transparency.HashSize)
		}
		out[k] = transparency.Hash(b)
	}
	return out, nil
}

// LogEntriesFound returns LogEntries' answer for leaves from to to-1 from
// the rows a store read (leaf index to entry): a leaf without a row fails
// with an error wrapping ErrNotFound.
func LogEntriesFound(from, to int64, found map[int64][]byte) ([][]byte, error) {
	out := make([][]byte, 0, len(found))
	for i := from; i < to; i++ {
		e, ok := found[i]
		if !ok {
			return nil, fmt.Errorf("transparency log: leaf %d: %w", i, ErrNotFound)
		}
		out = append(out, e)
	}
	return out, nil
}

// CheckLogRange refuses a LogEntries range that is not one.
func CheckLogRange(from, to int64) error {
	if from < 0 || to < from {
		return fmt.Errorf("transparency log: leaves %d to %d is not a range: want 0 <= from <= to", from, to-1)
	}
	return nil
}
