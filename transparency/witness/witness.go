// Package witness keeps C2SP tlog-witness witnesses up to date with the
// transparency log: it sends them each new checkpoint with a consistency
// proof from the size they know (add-checkpoint), verifies the
// cosignatures they return and stores them, so that the log can serve
// checkpoints a quorum of witnesses vouch for. It is apart from package
// transparency because it speaks HTTP.
package witness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/cardsign/cardsign/transparency"
)

// Endpoint is a witness the collector asks to cosign: its name and key,
// and the URL prefix its add-checkpoint endpoint is under.
type Endpoint struct {
	transparency.Witness
	URL    string       // prefix: add-checkpoint is POSTed to URL + "/add-checkpoint"
	Client *http.Client // nil: NewClient(Options.RequestTimeout, nil)
}

// Log is the transparency log the witnesses are kept up to date with.
// *transparency.Checkpointer satisfies it.
type Log interface {
	Size(ctx context.Context) (int64, error)
	CheckpointAt(ctx context.Context, size int64) ([]byte, error)
	ConsistencyProof(ctx context.Context, old, new int64) ([]transparency.Hash, error)
}

// Store keeps the cosignatures the witnesses returned. store.Cosignatures
// satisfies it.
type Store interface {
	PutCosignatures(ctx context.Context, cs []transparency.Cosignature) error
	Cosignatures(ctx context.Context, from int64, limit int) ([]transparency.Cosignature, error)
	WitnessSizes(ctx context.Context) (map[string]int64, error)
	PruneCosignatures(ctx context.Context, below int64) error
}

// Observer is told what the collector does: the daemon's metrics and
// alarms. Every method must return quickly: it is called on the
// collector's own goroutines.
type Observer interface {
	// Answered is each add-checkpoint request's outcome: err nil when the
	// witness cosigned size (its cosignatures verified); wrapping
	// ErrConflict for a split-view answer; wrapping ErrRefused when the
	// witness answered without a valid cosignature (a 409 naming the size
	// it knows, which the collector follows at once, a 400/403/404, a bad
	// or forged cosignature); else a failure (a timeout, a connection
	// error, a 5xx), retried with backoff.
	Answered(witness string, size int64, latency time.Duration, err error)
	// Conflict is a split-view alarm.
	Conflict(c *ConflictError)
	// Stored says cosignatures of size were stored (wake the signers
	// waiting for them).
	Stored(size int64)
}

// Options tunes a Collector; the zero value is usable.
type Options struct {
	RequestTimeout time.Duration // one add-checkpoint request (default 5s)
	PollInterval   time.Duration // how often Run reads the log's size (default 100ms)
	Logger         *slog.Logger  // nil: slog.Default()
	Observer       Observer      // nil: nobody is told
}

// ErrConflict is wrapped by every *ConflictError.
var ErrConflict = errors.New("witness: split view")

// ConflictError is a witness that saw a checkpoint of this log inconsistent
// with ours: another tree was signed under the log's key (a split view),
// or the witness's state is corrupt. Either way an operator must look.
type ConflictError struct {
	Witness string // the witness's name
	Size    int64  // the size of our checkpoint it was sent
	Known   int64  // the size the witness knows (-1: not said)
	Detail  string // what the witness answered, escaped
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("witness %q refuses the log's checkpoint of size %d as inconsistent with what it saw (known size %d): %s; another tree may have been signed with the log's key", e.Witness, e.Size, e.Known, e.Detail)
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// WitnessStatus is a witness's state as the collector sees it.
type WitnessStatus struct {
	Name        string
	URL         string
	Size        int64          // the largest size it cosigned
	LastSuccess time.Time      // when it last cosigned (zero: never here)
	LastError   string         // its last request's error ("" after a success)
	Conflict    *ConflictError // a split-view alarm, kept until a cosignature
}
