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
	// watchLogEvery spaces the warnings of an outage: the first failure
	// is logged at once, then one line per watchLogEvery while it lasts
	// (with the attempts made meanwhile), then one when it ends; a line
	// per reconnect attempt (one a second) would drown the log.
	watchLogEvery = time.Minute
)

// outageLog decides which of Watch's reconnect failures are logged.
type outageLog struct {
	since    time.Time // the first failure of this outage; zero: none
	loggedAt time.Time
	attempts int // failed attempts since loggedAt
}

// failed counts a failure at now and reports whether to log it, with the
// failed attempts it stands for and how long the outage has lasted.
func (o *outageLog) failed(now time.Time) (log bool, attempts int, down time.Duration) {
	if o.since.IsZero() {
		o.since = now
	}
	o.attempts++
	if !o.loggedAt.IsZero() && now.Sub(o.loggedAt) < watchLogEvery {
		return false, 0, 0
	}
	attempts, o.attempts, o.loggedAt = o.attempts, 0, now
	return true, attempts, now.Sub(o.since)
}

// ended reports whether an outage was under way (and how long it lasted),
// and starts afresh.
func (o *outageLog) ended(now time.Time) (bool, time.Duration) {
	if o.since.IsZero() {
		return false, 0
	}
	down := now.Sub(o.since)
	*o = outageLog{}
	return true, down
}

// watcher is the Store's part for store.Watcher: change announcements,
// heard on a connection of its own.
type watcher struct{ *core }

// Watch calls fn with the topic (store.TopicKeys, store.TopicDocuments) of
// each change another process (or this one) commits, and with "" after
// every (re)connect, when announcements may have been missed; see
// store.Watcher. It listens on a dedicated connection, not one of the pool's:
// LISTEN belongs to a session, which a pool hands to other work. It blocks
// until ctx is done, reconnecting with backoff whenever the connection is
// lost, and returns ctx's error. fn runs on Watch's goroutine; a slow fn
// delays the next announcement, not the database.
func (s *watcher) Watch(ctx context.Context, fn func(topic string)) error {
	backoff := watchBackoffMin
	var outage outageLog
	for {
		err := s.listen(ctx, fn, func() {
			backoff = watchBackoffMin
			if was, down := outage.ended(time.Now()); was {
				s.log.Info("store: change notifications resumed", "down_for", down.Round(time.Millisecond))
			}
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The store's logger names the database (Open): not again here.
		if log, attempts, down := outage.failed(time.Now()); log {
			if attempts == 1 {
				s.log.Warn("store: change notifications interrupted; reconnecting", "err", classify(ctx, err), "retry_every", watchBackoffMax)
			} else {
				s.log.Warn("store: change notifications still interrupted; reconnecting", "err", classify(ctx, err),
					"down_for", down.Round(time.Second), "failed_attempts", attempts, "retry_every", watchBackoffMax)
			}
		}
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
func (s *core) listen(ctx context.Context, fn func(string), connected func()) error {
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
