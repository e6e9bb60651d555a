package events

import (
	"context"
	"fmt"
	"time"
)

// Sink is where events go: a webhook, a syslog server, a file.
type Sink interface {
	// Send delivers msgs, in order. It returns how many were delivered (a
	// prefix of msgs) and, when not all were, the error that stopped it.
	// A message is delivered when the receiver acknowledged it (a 2xx
	// answer), it was written to the syslog connection, or it was written
	// and synced to the file.
	Send(ctx context.Context, msgs []Message) (int, error)
	// Close releases what the sink holds open.
	Close() error
}

// RetryAfterError is a receiver's request to wait before the next attempt
// (a 429 or 503 with Retry-After). Delivery waits that long, within its
// largest backoff.
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (the receiver asks to retry after %s)", e.Err, e.After)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }
