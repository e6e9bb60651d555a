package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

// logRows is the Store's part for store.Log: the transparency log's rows.
type logRows struct{ *core }

// The transparency log's storage (store.Log): tables log_entries and
// log_hashes of migration 6, appended to inside AppendAudit's transaction,
// under the audit_head lock.

const (
	// selectLogSize is the log's size: its last leaf's index + 1 (the
	// log_entries_extend trigger keeps the indexes gap-free from 0).
	selectLogSize    = `SELECT coalesce(max(idx) + 1, 0) FROM log_entries`
	selectLogHashes  = `SELECT idx, hash FROM log_hashes WHERE idx = ANY($1)`
	insertLogEntries = `INSERT INTO log_entries (idx, entry) SELECT * FROM unnest($1::bigint[], $2::bytea[])`
	insertLogHashes  = `INSERT INTO log_hashes (idx, hash) SELECT * FROM unnest($1::bigint[], $2::bytea[])`
)

// txLog is the log's rows inside tx (transparency.Rows): reads run at
// once, writes are queued on batch, when set, to go with the transaction's
// other statements in one round trip, or else sent at once.
type txLog struct {
	tx    pgx.Tx
	batch *pgx.Batch
}

// ReadHashes reads stored tree hashes inside tx.
func (t txLog) ReadHashes(ctx context.Context, indexes []int64) ([]transparency.Hash, error) {
	return readLogHashes(ctx, t.tx, indexes)
}

// WriteLeaves inserts (or queues the inserts of) leaves first, first+1,
// ... and the tree hashes they add; queued, each has a result to read
// (Exec) in this order.
func (t txLog) WriteLeaves(ctx context.Context, first int64, entries [][]byte, hashes []transparency.StoredHash) error {
	b := t.batch
	if b == nil {
		b = &pgx.Batch{}
	}
	leaves := make([]int64, len(entries))
	for i := range entries {
		leaves[i] = first + int64(i)
	}
	idx := make([]int64, len(hashes))
	hs := make([][]byte, len(hashes))
	for i := range hashes {
		idx[i], hs[i] = hashes[i].Index, hashes[i].Hash[:]
	}
	b.Queue(insertLogEntries, leaves, entries)
	b.Queue(insertLogHashes, idx, hs)
	if t.batch != nil {
		return nil
	}
	return t.tx.SendBatch(ctx, b).Close()
}

// catchUpLog makes every audit record a leaf of the transparency log: the
// records appended before the log existed (migration 6) get theirs when the
// store opens, transparency.CatchUpChunk per transaction. Each transaction
// takes the audit_head lock, as appends do, and reads the log's size and
// the head again, so replicas opening the database at once append each
// leaf once and no append runs between two chunks of one.
func (s *core) catchUpLog(ctx context.Context) error {
	// A read first: a caught-up log costs an open no lock. A missing head
	// row (-1) is reported by lockHead below.
	var head, size int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT seq FROM audit_head WHERE id = 1), -1), (`+selectLogSize+`)`).Scan(&head, &size)
	if err != nil {
		return fmt.Errorf("transparency log size: %w", classify(ctx, err))
	}
	return transparency.CatchUp(ctx, s.log, size, head, func(ctx context.Context) (int64, int64, error) {
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			var err error
			if head, _, size, err = lockHead(ctx, tx); err != nil || size == head {
				return err
			}
			size, err = catchUpChunk(ctx, tx, size, head)
			return err
		})
		return size, head, classify(ctx, err)
	})
}

// catchUpChunk makes up to transparency.CatchUpChunk records after the log's
// size leaves inside tx, which holds the audit head's lock, and returns the
// log's new size.
func catchUpChunk(ctx context.Context, tx pgx.Tx, size, head int64) (int64, error) {
	recs, err := listAudit(ctx, tx, size, transparency.CatchUpChunk)
	if err != nil {
		return size, fmt.Errorf("list audit after %d: %w", size, err)
	}
	return transparency.CatchUpStep(ctx, txLog{tx: tx}, size, head, recs)
}

// LogHashes returns the tree hashes stored at indexes, in the order asked.
func (s *logRows) LogHashes(ctx context.Context, indexes []int64) ([]transparency.Hash, error) {
	hs, err := s.tail.ReadHashes(ctx, indexes, func(ctx context.Context, missing []int64) ([]transparency.Hash, error) {
		return readLogHashes(ctx, s.pool, missing)
	})
	if err != nil {
		return nil, fmt.Errorf("store: %w", classify(ctx, err))
	}
	return hs, nil
}

// LogEntries returns the encoded entries of leaves from to to-1.
func (s *logRows) LogEntries(ctx context.Context, from, to int64) ([][]byte, error) {
	if err := store.CheckLogRange(from, to); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	found, err := scanLogRows(s.pool.Query(ctx, `SELECT idx, entry FROM log_entries WHERE idx >= $1 AND idx < $2`, from, to))
	if err != nil {
		return nil, wrap(ctx, fmt.Sprintf("transparency log: leaves %d to %d", from, to-1), err)
	}
	entries, err := store.LogEntriesFound(from, to, found)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return entries, nil
}

// readLogHashes reads the hashes at indexes through q.
func readLogHashes(ctx context.Context, q querier, indexes []int64) ([]transparency.Hash, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	found, err := scanLogRows(q.Query(ctx, selectLogHashes, indexes))
	if err != nil {
		return nil, fmt.Errorf("transparency log: read tree hashes: %w", err)
	}
	return store.LogHashesFound(indexes, found)
}

// scanLogRows reads the rows of a query for entries or hashes.
func scanLogRows(rows pgx.Rows, err error) (map[int64][]byte, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ScanLogRows(rows)
}
