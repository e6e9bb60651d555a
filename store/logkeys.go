package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/transparency"
)

// LogKeys keeps the transparency log's key record (transparency.KeysStore)
// in a store's document transparency.KeysDocument, written under a lease of
// that name held by Holder, so replicas starting at once take turns.
type LogKeys struct {
	Store interface {
		Documents
		Leases
	}
	Holder string // the lease holder, e.g. "cardsignd-start/PID"
}

// ReadKeys reads the record; found is false when none was made.
func (k LogKeys) ReadKeys(ctx context.Context) (transparency.KeysRecord, bool, error) {
	doc, err := k.Store.Document(ctx, transparency.KeysDocument)
	switch {
	case errors.Is(err, ErrNotFound):
		return transparency.KeysRecord{}, false, nil
	case err != nil:
		return transparency.KeysRecord{}, false, err
	}
	return transparency.KeysRecord{Seq: doc.Seq, Body: doc.Body, UpdatedAt: doc.UpdatedAt}, true, nil
}

// RecordKeys writes rec under the lease; a lease held by another replica
// or a document written since the read is transparency.ErrKeysRaced.
func (k LogKeys) RecordKeys(ctx context.Context, rec transparency.KeysRecord) error {
	lease, err := k.Store.AcquireLease(ctx, transparency.KeysDocument, k.Holder, 10*time.Second)
	if err != nil {
		return raced(err)
	}
	defer func() { _ = k.Store.ReleaseLease(context.WithoutCancel(ctx), lease) }()
	return raced(k.Store.PutDocument(ctx, lease, Document{Name: transparency.KeysDocument, Seq: rec.Seq, Body: rec.Body}))
}

// raced marks the errors of another replica's concurrent record as
// transparency.ErrKeysRaced, keeping the store's sentinel too.
func raced(err error) error {
	if errors.Is(err, ErrLeaseHeld) || errors.Is(err, ErrStaleDocument) {
		return fmt.Errorf("%w: %w", transparency.ErrKeysRaced, err)
	}
	return err
}
