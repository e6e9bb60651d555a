package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconnect backoff of Watch: it starts short and stays short (capped at a
// second), so that after a database restart replicas hear of changes again
// within about a second of the server accepting connections.
const (
	watchBackoffMin = 50 * time.Millisecond
	watchBackoffMax = time.Second
	watchIdle       = 15 * time.Second
	watchPing       = 5 * time.Second
)

// Watch calls fn with the topic (store.TopicKeys, store.TopicDocuments) of
// each change another process (or this one) commits, and with "" after
// every (re)connect, when announcements may have been missed; see
// store.Watcher. It listens on a dedicated connection, not one of the pool's:
// LISTEN belongs to a session, which a pool hands to other work. It blocks
// until ctx is done, reconnecting with backoff whenever the connection is
// lost, and returns ctx's error. fn runs on Watch's goroutine; a slow fn
// delays the next announcement, not the database.
func (s *Store) Watch(ctx context.Context, fn func(topic string)) error {
	backoff := watchBackoffMin
	for {
		err := s.listen(ctx, fn, func() { backoff = watchBackoffMin })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn("store: change notifications interrupted; reconnecting", "database", s.where, "err", classify(ctx, err), "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, watchBackoffMax)
	}
}

// listen runs one connection's life: connect, LISTEN, fn(""), then fn for
// each notification until an error. connected is called once LISTEN took.
func (s *Store) listen(ctx context.Context, fn func(string), connected func()) error {
	cfg := s.conn.Copy()
	// Named apart from the pool's connections in pg_stat_activity: an
	// operator (or a test) can tell the listener, whatever it last ran.
	cfg.RuntimeParams["application_name"] = cfg.RuntimeParams["application_name"] + "-listen"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, `LISTEN cardsign`); err != nil {
		return err
	}
	connected()
	fn("")
	for {
		// A server that shuts down says so and closes the connection, which
		// ends the wait at once; one that vanishes (a partition, a host
		// lost) says nothing, so the wait is bounded and an idle connection
		// pinged: a dead one is found within watchIdle+watchPing.
		wctx, cancel := context.WithTimeout(ctx, watchIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			fn(n.Payload)
		case ctx.Err() == nil && wctx.Err() != nil:
			pctx, cancel := context.WithTimeout(ctx, watchPing)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}
