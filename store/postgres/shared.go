package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlrows"
)

// documents is the Store's part for store.Documents.
type documents struct{ *core }

// leases is the Store's part for store.Leases.
type leases struct{ *core }

// clock is the Store's part for store.Clock and store.Counters: the store's
// time and its named counters.
type clock struct{ *core }

// NextSequence returns the next value (1, 2, …) of the durable counter name.
// One statement: ON CONFLICT DO UPDATE locks the counter's row, so
// concurrent callers get consecutive values, each once.
func (s *clock) NextSequence(ctx context.Context, name string) (int64, error) {
	if name == "" {
		return 0, errors.New("store: next sequence: empty name")
	}
	var v int64
	err := s.pool.QueryRow(ctx, `INSERT INTO sequences (name, value) VALUES ($1, 1)
		ON CONFLICT (name) DO UPDATE SET value = sequences.value + 1
		RETURNING value`, name).Scan(&v)
	if err != nil {
		return 0, wrap(ctx, fmt.Sprintf("next sequence %q", name), err)
	}
	return v, nil
}

// Counter returns the counter's current value (0: never used).
func (s *clock) Counter(ctx context.Context, name string) (int64, error) {
	v, err := sqlrows.Counter(ctx, rowsOf(s.pool), `SELECT value FROM sequences WHERE name = $1`, name)
	if err != nil {
		return 0, wrap(ctx, fmt.Sprintf("counter %q", name), err)
	}
	return v, nil
}

// RaiseCounter sets the counter to atLeast when it is below it.
func (s *clock) RaiseCounter(ctx context.Context, name string, atLeast int64) error {
	if name == "" {
		return errors.New("store: raise counter: empty name")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO sequences (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = greatest(sequences.value, excluded.value)`, name, atLeast)
	if err != nil {
		return wrap(ctx, fmt.Sprintf("raise counter %q", name), err)
	}
	return nil
}

// Now returns the database server's clock (clock_timestamp(): the time of
// the call, not of the transaction's start), the clock every replica shares.
// It has microsecond precision.
func (s *clock) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
		return time.Time{}, wrap(ctx, "database clock", err)
	}
	return t.UTC(), nil
}

// acquireLease takes or renews a lease in one statement, on the database
// clock read once (the CTE) so every comparison in it agrees. The row is
// inserted when the name is new; otherwise ON CONFLICT locks the existing
// row (concurrent acquirers queue on it, each then seeing the previous one's
// result) and updates it only when it is free (expired) or held by the
// same holder. Taking a free lease bumps the epoch; renewing an unexpired
// one keeps it. No row returned means another holder's lease is unexpired.
const acquireLease = `WITH now AS (SELECT clock_timestamp() AS t)
INSERT INTO leases AS l (name, holder, epoch, expires_at)
SELECT $1, $2, 1, now.t + $3::bigint * interval '1 microsecond' FROM now
ON CONFLICT (name) DO UPDATE SET
	holder = EXCLUDED.holder,
	epoch = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > (SELECT t FROM now) THEN l.epoch ELSE l.epoch + 1 END,
	expires_at = EXCLUDED.expires_at
WHERE l.holder = EXCLUDED.holder OR l.expires_at <= (SELECT t FROM now)
RETURNING holder, epoch, expires_at`

// AcquireLease takes the lease name for holder until the database's now +
// ttl, or renews it; see store.Leases. Expiry is compared on the database's
// clock only, so a replica whose clock is off neither steals a live lease
// nor keeps a dead one.
func (s *leases) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	op := fmt.Sprintf("acquire lease %q for %q", name, holder)
	if name == "" || holder == "" {
		return store.Lease{}, fmt.Errorf("store: %s: empty lease name or holder", op)
	}
	if ttl < time.Microsecond {
		return store.Lease{}, fmt.Errorf("store: %s: ttl %s is not positive (the database counts microseconds)", op, ttl)
	}
	l := store.Lease{Name: name}
	err := s.pool.QueryRow(ctx, acquireLease, name, holder, ttl.Microseconds()).Scan(&l.Holder, &l.Epoch, &l.Expires)
	if err == nil {
		l.Expires = l.Expires.UTC()
		return l, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, wrap(ctx, op, err)
	}
	// Held by another holder: say by whom, until when.
	err = s.pool.QueryRow(ctx, `SELECT holder, epoch, expires_at FROM leases WHERE name = $1`, name).Scan(&l.Holder, &l.Epoch, &l.Expires)
	if err != nil {
		return store.Lease{}, wrap(ctx, op, err)
	}
	l.Expires = l.Expires.UTC()
	return l, fmt.Errorf("store: %s: %w: held by %q (epoch %d) until %s", op, store.ErrLeaseHeld, l.Holder, l.Epoch, l.Expires.Format(time.RFC3339Nano))
}

// ReleaseLease expires l now, on the database clock, when it is still held
// as l (same holder and epoch, unexpired); otherwise it does nothing.
func (s *leases) ReleaseLease(ctx context.Context, l store.Lease) error {
	_, err := s.pool.Exec(ctx, `UPDATE leases SET expires_at = clock_timestamp()
		WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp()`, l.Name, l.Holder, l.Epoch)
	return wrap(ctx, fmt.Sprintf("release lease %q of %q", l.Name, l.Holder), err)
}

// Document returns the stored document name, or an error wrapping
// store.ErrNotFound.
func (s *documents) Document(ctx context.Context, name string) (store.Document, error) {
	d := store.Document{Name: name}
	err := s.pool.QueryRow(ctx, `SELECT seq, body, meta, updated_at FROM documents WHERE name = $1`, name).
		Scan(&d.Seq, &d.Body, &d.Meta, &d.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Document{}, fmt.Errorf("store: document %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return store.Document{}, wrap(ctx, fmt.Sprintf("document %q", name), err)
	}
	d.UpdatedAt = d.UpdatedAt.UTC()
	return d, nil
}

// PutDocument replaces doc.Name, fenced by fence; see store.Documents.
//
// The fence is checked with SELECT … FOR SHARE on the lease row, in the
// writing transaction: another holder taking the lease (an UPDATE of that
// row) waits until this transaction ends, so the document is committed
// while fence still holds, or not at all. The sequence check and the write
// are one upsert that changes nothing unless doc.Seq is greater.
func (s *documents) PutDocument(ctx context.Context, fence store.Lease, doc store.Document) error {
	op := fmt.Sprintf("put document %q (seq %d)", doc.Name, doc.Seq)
	if doc.Name == "" {
		return fmt.Errorf("store: %s: empty name", op)
	}
	body, meta := doc.Body, doc.Meta
	if body == nil {
		body = []byte{} // NOT NULL: nil would be sent as NULL
	}
	if meta == nil {
		meta = []byte{}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := holdFence(ctx, tx, fence); err != nil {
			return err
		}
		var one int
		err := tx.QueryRow(ctx, `INSERT INTO documents AS d (name, seq, body, meta, updated_at)
			VALUES ($1, $2, $3, $4, clock_timestamp())
			ON CONFLICT (name) DO UPDATE SET seq = EXCLUDED.seq, body = EXCLUDED.body, meta = EXCLUDED.meta, updated_at = EXCLUDED.updated_at
			WHERE d.seq < EXCLUDED.seq
			RETURNING 1`, doc.Name, doc.Seq, body, meta).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: the stored one's seq is %d or more", store.ErrStaleDocument, doc.Seq)
		}
		if err != nil {
			return err
		}
		return notify(ctx, tx, store.TopicDocuments)
	})
	return wrap(ctx, op, err)
}

// holdFence checks, in a writing transaction, that fence is still held,
// unexpired, at its epoch (else store.ErrLeaseLost), with SELECT … FOR
// SHARE on the lease row: another holder taking the lease (an UPDATE of
// that row) waits until tx ends, so the write commits while fence holds,
// or not at all.
func holdFence(ctx context.Context, tx pgx.Tx, fence store.Lease) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM leases
		WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp()
		FOR SHARE`, fence.Name, fence.Holder, fence.Epoch).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: lease %q is no longer held by %q at epoch %d", store.ErrLeaseLost, fence.Name, fence.Holder, fence.Epoch)
	}
	return err
}
