package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardsign/cardsign/store"
)

// unavailableError marks err as store.ErrUnavailable while keeping it (and
// whatever it wraps: a *pgconn.PgError, a net error) reachable with
// errors.Is and errors.As.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string   { return "database unavailable: " + e.err.Error() }
func (e *unavailableError) Unwrap() []error { return []error{store.ErrUnavailable, e.err} }

// classify marks err as store.ErrUnavailable when it says the database cannot
// be reached now, so the caller may retry later; other errors are returned
// unchanged. The caller's own context ending is not unavailability.
func classify(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	if unavailable(err) {
		return &unavailableError{err}
	}
	return err
}

// unavailable reports whether err means the server could not be reached or
// went away: nothing the request did was wrong, and a later attempt may work.
func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection exception
			return true
		case pe.Code == "57P01", // admin_shutdown: pg_ctl stop -m fast, or the backend terminated
			pe.Code == "57P02", // crash_shutdown: another backend crashed, every session is reset
			pe.Code == "57P03", // cannot_connect_now: the server is starting up or shutting down
			pe.Code == "53300", // too_many_connections
			pe.Code == "25P03", // idle_in_transaction_session_timeout: the session was ended under a slow step
			pe.Code == "25006": // read_only_sql_transaction: a standby (after a failover) until the URL reaches the primary
			return true
		}
		return false // any other server error is an answer, not an outage
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), // could not connect (refused, DNS, TLS, authentication timing out…)
		pgconn.Timeout(err),     // a network timeout, not the caller's context
		pgconn.SafeToRetry(err), // pgx says nothing was sent
		errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, driver.ErrBadConn), // through database/sql (migrations)
		errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// pgx reports a connection that died mid-query with plain errors
	// ("conn closed", "unexpected EOF", "broken pipe"), some of which carry
	// no type to test.
	msg := err.Error()
	for _, s := range []string{"conn closed", "unexpected EOF", "broken pipe", "connection reset", "connection refused"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// wrap is the package's error for operation op: "store: op: err", with err
// classified (store.ErrUnavailable) unless it is nil.
func wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("store: %s: %w", op, classify(ctx, err))
}
