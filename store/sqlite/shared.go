package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
)

// documents is the Store's part for store.Documents.
type documents struct{ *core }

// leases is the Store's part for store.Leases.
type leases struct{ *core }

// Now is the store's clock. A SQLite file is shared only by processes on
// one host, so the host's clock is the store's.
func (s *clock) Now(context.Context) (time.Time, error) { return time.Now().UTC(), nil }

// MakeKey runs make inside the write transaction (which holds SQLite's
// write lock, the key-set lock of this store) and inserts the record it
// returns. Audit appends wait while make runs: making a key is rare, and a
// second process's rotation must see the first's record before it makes a
// key of its own.
func (s *keys) MakeKey(ctx context.Context, make func(ctx context.Context, existing []jwks.KeyRecord) (jwks.KeyRecord, error)) (jwks.KeyRecord, error) {
	var made jwks.KeyRecord
	var makeErr error
	err := s.write(ctx, func(tx *sql.Tx) error {
		existing, err := listKeys(ctx, tx)
		if err != nil {
			return err
		}
		made, makeErr = make(ctx, existing)
		if makeErr != nil {
			return makeErr
		}
		return insertKey(ctx, tx, made)
	})
	if makeErr != nil {
		return jwks.KeyRecord{}, makeErr // as is: the caller's refusal
	}
	if err != nil {
		return jwks.KeyRecord{}, fmt.Errorf("store: make key %s: %w", made.KID, err)
	}
	return made, nil
}

// AcquireLease takes or renews a lease; see store.Leases.
func (s *leases) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	if name == "" || holder == "" || ttl <= 0 {
		return store.Lease{}, fmt.Errorf("store: acquire lease %q for %q: name, holder and a positive ttl are required", name, holder)
	}
	var l store.Lease
	var held bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := time.Now().UnixNano()
		cur, found, err := readLease(ctx, tx, name)
		if err != nil {
			return err
		}
		switch {
		case found && cur.expires > now && cur.holder != holder:
			l, held = cur.lease(name), true
			return nil
		case found && cur.expires > now: // renewal: same epoch
		case found: // expired: taken anew, whoever had it
			cur.epoch++
		default:
			cur.epoch = 1
		}
		cur.holder, cur.expires = holder, now+int64(ttl)
		if _, err := tx.ExecContext(ctx, `INSERT INTO leases (name, holder, epoch, expires_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, epoch = excluded.epoch, expires_at = excluded.expires_at`,
			name, cur.holder, cur.epoch, cur.expires); err != nil {
			return err
		}
		l = cur.lease(name)
		return nil
	})
	if err != nil {
		return store.Lease{}, fmt.Errorf("store: acquire lease %q: %w", name, err)
	}
	if held {
		return l, fmt.Errorf("store: lease %q: %w: %s until %s", name, store.ErrLeaseHeld, l.Holder, l.Expires.Format(time.RFC3339Nano))
	}
	return l, nil
}

// ReleaseLease expires l now if it is still held as l.
func (s *leases) ReleaseLease(ctx context.Context, l store.Lease) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ? AND epoch = ? AND expires_at > ?`,
			time.Now().UnixNano(), l.Name, l.Holder, l.Epoch, time.Now().UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("store: release lease %q: %w", l.Name, err)
	}
	return nil
}

type leaseRow struct {
	holder  string
	epoch   int64
	expires int64
}

func (r leaseRow) lease(name string) store.Lease {
	return store.Lease{Name: name, Holder: r.holder, Epoch: r.epoch, Expires: store.FromNanos(r.expires)}
}

func readLease(ctx context.Context, q rowQuerier, name string) (leaseRow, bool, error) {
	var r leaseRow
	err := q.QueryRowContext(ctx, `SELECT holder, epoch, expires_at FROM leases WHERE name = ?`, name).Scan(&r.holder, &r.epoch, &r.expires)
	if errors.Is(err, sql.ErrNoRows) {
		return leaseRow{}, false, nil
	}
	return r, err == nil, err
}

// Document returns the stored document name.
func (s *documents) Document(ctx context.Context, name string) (store.Document, error) {
	d := store.Document{Name: name}
	var updated int64
	err := s.db.QueryRowContext(ctx, `SELECT seq, body, meta, updated_at FROM documents WHERE name = ?`, name).Scan(&d.Seq, &d.Body, &d.Meta, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Document{}, fmt.Errorf("store: document %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return store.Document{}, fmt.Errorf("store: document %q: %w", name, err)
	}
	d.UpdatedAt = store.FromNanos(updated)
	return d, nil
}

// PutDocument stores doc if fence is still held and doc.Seq is newer.
func (s *documents) PutDocument(ctx context.Context, fence store.Lease, doc store.Document) error {
	if doc.Name == "" {
		return errors.New("store: put document: empty name")
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := time.Now().UnixNano()
		if err := holdFence(ctx, tx, fence, now); err != nil {
			return err
		}
		var seq int64
		err := tx.QueryRowContext(ctx, `SELECT seq FROM documents WHERE name = ?`, doc.Name).Scan(&seq)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case doc.Seq <= seq:
			return fmt.Errorf("%w: seq %d, stored %d", store.ErrStaleDocument, doc.Seq, seq)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO documents (name, seq, body, meta, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET seq = excluded.seq, body = excluded.body, meta = excluded.meta, updated_at = excluded.updated_at`,
			doc.Name, doc.Seq, nonNil(doc.Body), nonNil(doc.Meta), now)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: put document %q seq %d: %w", doc.Name, doc.Seq, err)
	}
	return nil
}

// nonNil stores an empty BLOB rather than NULL, which the NOT NULL
// columns refuse.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return bytes.Clone(b)
}

// holdFence checks, inside a write transaction (which holds SQLite's write
// lock, so no one takes the lease meanwhile), that fence is still held,
// unexpired at now, at its epoch; else store.ErrLeaseLost.
func holdFence(ctx context.Context, tx *sql.Tx, fence store.Lease, now int64) error {
	cur, found, err := readLease(ctx, tx, fence.Name)
	if err != nil {
		return err
	}
	if !found || cur.holder != fence.Holder || cur.epoch != fence.Epoch || cur.expires <= now {
		return fmt.Errorf("%w: %q is not held by %q at epoch %d", store.ErrLeaseLost, fence.Name, fence.Holder, fence.Epoch)
	}
	return nil
}
