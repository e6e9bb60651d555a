// Package postgres implements store.Store on PostgreSQL, with pgx v5, for
// several cardsignd replicas sharing one database.
//
// Concurrency: every transaction runs at READ COMMITTED and serialises on a
// row lock where it must. Key-set changes (CreateKey, MakeKey, UpdateKeys)
// lock the one row of keyset_lock first; audit appends lock the one row of
// audit_head. Row locks are transaction-scoped, so they work behind
// PgBouncer in transaction mode and through a recycling pool, unlike
// session-level advisory locks, which this package never takes; nor does it
// use SERIALIZABLE, which would need a retry loop around every transaction.
//
// Times the callers give (key lifecycle times, audit record times) are
// stored as BIGINT unix nanoseconds, as in the SQLite store, so they read
// back exactly. Times the store decides (lease expiry, document updates)
// come from the database server's clock (clock_timestamp()), never from a
// replica's.
//
// Changes to keys and documents are announced with NOTIFY on the channel
// "cardsign" (payload store.TopicKeys or store.TopicDocuments), sent inside
// the changing transaction, so they are delivered on commit only; Watch
// listens.
//
// Errors that mean the database cannot be reached now (connection refused or
// lost, server shutting down or starting) wrap store.ErrUnavailable.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardsign/cardsign/secretfile"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"
)

// DefaultMaxConns is the pool size when Config.MaxConns is 0. Audit appends
// serialise on one row lock, so more connections add little throughput to
// them; the rest cover readers (JWKS, audit listing) beside a writer.
const DefaultMaxConns = 8

// Config says how to reach the database.
type Config struct {
	// URL is a postgres:// or postgresql:// URL, or a keyword/value DSN
	// ("host=… dbname=…"), as libpq and pgx accept them, sslmode included.
	URL string
	// PasswordFile, when set, names a file holding the password (read once
	// by Open; one trailing newline is trimmed). It must not be readable by
	// group or others, and URL must not carry a password too. When unset,
	// a password in URL, PGPASSWORD or the password file (PGPASSFILE,
	// default ~/.pgpass) is used, as libpq does.
	PasswordFile string
	// MaxConns bounds the connection pool; 0 means DefaultMaxConns. Watch
	// uses one more connection of its own, and Open up to 3 more for as
	// long as it migrates.
	MaxConns int32
	// Log receives what the store has to say (migrations applied, Watch
	// reconnecting), each line naming the database (redacted URL) under
	// the key "database": do not add it to Log; nil discards it.
	Log *slog.Logger
}

// Store is a store.Store on a PostgreSQL database. It is safe for concurrent
// use, also by several processes sharing the database. It is composed of
// one part per role interface of package store (change announcements,
// keys, audit log, clock, leases, documents, agents, log rows), each over
// the connection pool they share (core).
type Store struct {
	*core
	watcher
	keys
	auditTrail
	clock
	leases
	documents
	agents
	logRows
	cosignatures
	approvals
	eventCursors
}

// newStore composes a Store of its parts over c.
func newStore(c *core) *Store {
	return &Store{core: c, watcher: watcher{c}, keys: keys{c}, auditTrail: auditTrail{c}, clock: clock{c}, leases: leases{c},
		documents: documents{c}, agents: agents{c}, logRows: logRows{c}, cosignatures: cosignatures{c},
		approvals: approvals{c}, eventCursors: eventCursors{c}}
}

// core is what the Store's parts share: the connection pool and this
// process's state of the database.
type core struct {
	pool *pgxpool.Pool
	// conn is the pool's connection config, which Watch copies for its own
	// dedicated connection.
	conn *pgx.ConnConfig
	log  *slog.Logger
	// where is the redacted URL, for errors and logs.
	where string
	// tail is what this Store knows of the transparency log's right end:
	// the edge of its last committed append (the next append, if no
	// replica appended since, reads no tree hashes) and the tree hashes it
	// wrote or read (the inclusion proofs of new leaves read them).
	tail *transparency.Tail
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Watcher  = (*Store)(nil)
	_ store.Counters = (*Store)(nil)
)

// Open connects to the database cfg names, checks it answers, applies any
// schema migrations it lacks (see migrate), and makes every audit record
// appended before the transparency log existed a leaf of it (catchUpLog).
// A database whose schema is newer than this binary knows is refused.
// Errors name the URL without its password; one that means the server
// could not be reached wraps store.ErrUnavailable.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	where := Redact(cfg.URL)
	poolCfg, err := parseConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", where, err)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Every line the store logs names its database, once: callers pass
	// their logger without it.
	log = log.With("database", where)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", where, err)
	}
	s := newStore(&core{pool: pool, conn: poolCfg.ConnConfig, log: log, where: where, tail: transparency.NewTail(0)})
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: cannot reach PostgreSQL at %s (is the server running, and are the URL, sslmode and password right?): %w",
			where, classify(ctx, err))
	}
	if err := s.migrate(ctx, poolCfg); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: open %s: %w", where, err)
	}
	if err := s.catchUpLog(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: open %s: %w", where, err)
	}
	return s, nil
}

// ParseConfig is how cfg is read: Open, CheckSchema and cardsignd's
// --check-config all parse with it, so a URL, a keyword/value string or a
// pgx setting (default_query_exec_mode for PgBouncer) that one accepts, the
// others accept too. It reads the password file, and connects to nothing.
func ParseConfig(cfg Config) (*pgxpool.Config, error) { return parseConfig(cfg) }

// parseConfig turns cfg into a pool config, with the password file applied.
func parseConfig(cfg Config) (*pgxpool.Config, error) {
	if cfg.URL == "" {
		return nil, errors.New("no database URL: give a postgres:// URL")
	}
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("max_conns is %d: give a positive number, or 0 for the default (%d)", cfg.MaxConns, DefaultMaxConns)
	}
	var password string
	if cfg.PasswordFile != "" {
		if HasPassword(cfg.URL) {
			return nil, fmt.Errorf("the URL carries a password and password_file %s gives one too: keep the password in one place (the file)", cfg.PasswordFile)
		}
		var err error
		if password, err = readPasswordFile(cfg.PasswordFile); err != nil {
			return nil, err
		}
	}
	// pgx's own errors redact the password (ParseConfigError).
	poolCfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.PasswordFile != "" {
		poolCfg.ConnConfig.Password = password // every host of the URL (Fallbacks) shares it
	}
	poolCfg.MaxConns = cfg.MaxConns
	if poolCfg.MaxConns == 0 {
		poolCfg.MaxConns = DefaultMaxConns
	}
	poolCfg.MinConns = 0
	// Say who we are in pg_stat_activity, unless the URL did.
	if poolCfg.ConnConfig.RuntimeParams["application_name"] == "" {
		poolCfg.ConnConfig.RuntimeParams["application_name"] = "cardsign"
	}
	// Connections idle for a while are pinged before use (pgxpool's
	// default); dead ones found by the health check are replaced sooner
	// after a database restart.
	poolCfg.HealthCheckPeriod = 5 * time.Second
	return poolCfg, nil
}

// MaxPasswordFile bounds what readPasswordFile reads: a password file holds
// one password.
const MaxPasswordFile = 4 << 10

// readPasswordFile reads the password from path: a regular file that group
// and others cannot read, its content with one trailing newline (LF or CRLF)
// removed. Errors name the file, never its content.
func readPasswordFile(path string) (string, error) {
	// Opened without blocking: a FIFO at the path would hang the start.
	f, st, err := secretfile.Open(path, 0)
	var nr *secretfile.NotRegularError
	if errors.As(err, &nr) {
		return "", fmt.Errorf("password_file %s is not a regular file (it is a %s)", path, secretfile.Kind(nr.Mode))
	}
	if err != nil {
		return "", fmt.Errorf("password_file: %w", err) // *PathError names the file
	}
	defer f.Close()
	if st.Mode().Perm()&0o044 != 0 {
		return "", fmt.Errorf("password_file %s has mode %#o, which lets group or others read the database password; run chmod 600 %s",
			path, uint32(st.Mode().Perm()), path)
	}
	b, err := secretfile.ReadAll(f, st, MaxPasswordFile)
	var tl *secretfile.TooLargeError
	if errors.As(err, &tl) {
		return "", fmt.Errorf("password_file %s is over %d bytes; it must hold the password only", path, MaxPasswordFile)
	}
	if err != nil {
		return "", fmt.Errorf("password_file: read %s: %w", path, err)
	}
	p := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if p == "" {
		return "", fmt.Errorf("password_file %s is empty", path)
	}
	if strings.ContainsAny(p, "\r\n") {
		return "", fmt.Errorf("password_file %s holds more than one line; it must hold the password only", path)
	}
	return p, nil
}

// IsURL reports whether s is a PostgreSQL URL (postgres:// or
// postgresql://), for configuration that takes a file path or a URL.
func IsURL(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// dsnPassword matches a password or sslpassword keyword in a keyword/value
// DSN, quoted or not.
var dsnPassword = regexp.MustCompile(`\b(ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|\S*)`)

// Redact returns url with any password (in the user information, or a
// password or sslpassword parameter) replaced by "xxxxx", for logs and
// errors. It handles URLs and keyword/value DSNs; a string it cannot parse
// is returned with anything that could be a password masked.
func Redact(s string) string {
	if !IsURL(s) {
		return dsnPassword.ReplaceAllString(s, "${1}password=xxxxx")
	}
	u, err := url.Parse(s)
	if err != nil {
		// Unparsable: mask everything between the scheme and the last '@',
		// and any password parameter.
		scheme, rest, _ := strings.Cut(s, "://")
		if i := strings.LastIndexByte(rest, '@'); i >= 0 {
			rest = "xxxxx" + rest[i:]
		}
		return scheme + "://" + dsnPassword.ReplaceAllString(rest, "${1}password=xxxxx")
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	// The query is rewritten parameter by parameter, as written: encoding
	// it again (url.Values.Encode) would sort it and percent-encode what
	// the operator wrote plainly (host=/var/run/postgresql), and the log
	// would show a URL that is not the configured one.
	params := strings.Split(u.RawQuery, "&")
	for i, p := range params {
		k, _, _ := strings.Cut(p, "=")
		if name, err := url.QueryUnescape(k); err == nil && (strings.EqualFold(name, "password") || strings.EqualFold(name, "sslpassword")) {
			params[i] = k + "=xxxxx"
		}
	}
	u.RawQuery = strings.Join(params, "&")
	return u.String()
}

// HasPassword reports whether the URL or DSN s carries a password itself.
func HasPassword(s string) bool {
	if !IsURL(s) {
		for _, m := range dsnPassword.FindAllStringSubmatch(s, -1) {
			if m[1] == "" { // password=, not sslpassword=
				return true
			}
		}
		return false
	}
	u, err := url.Parse(s)
	if err != nil {
		return strings.Contains(s, "@") // cannot tell: assume so
	}
	if _, ok := u.User.Password(); ok {
		return true
	}
	for k := range u.Query() {
		if strings.EqualFold(k, "password") {
			return true
		}
	}
	return false
}

// Close closes the pool. Committed data is already durable.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// beginQuery starts every transaction of the store.
//
// READ COMMITTED is set explicitly rather than trusting the server's
// default_transaction_isolation; the row locks each transaction takes give
// the serialisation that matters.
//
// idle_in_transaction_session_timeout bounds how long a session of ours may
// sit idle inside a transaction; the server then ends the session, releasing
// its row locks. A replica paused or cut off while holding the audit head or
// the key-set lock would otherwise stall every replica's appends or key
// changes until TCP gave up, minutes later. 30 s exceeds the longest pause a
// transaction makes on purpose: MakeKey's make, which creates a key at an HSM
// or KMS while holding the key-set lock. It is SET LOCAL, in the same round
// trip as BEGIN (pgx sends an argument-less statement with the simple
// protocol, which takes several): as a startup parameter PgBouncer would
// refuse it.
const beginQuery = "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL idle_in_transaction_session_timeout = '30s'"

// commitError marks an error of COMMIT itself: the transaction may or may
// not have been committed (the connection can be lost after the server
// committed and before it said so).
type commitError struct{ err error }

func (e *commitError) Error() string {
	return "commit (outcome unknown: the transaction may have been committed): " + e.err.Error()
}
func (e *commitError) Unwrap() error { return e.err }

// inTx runs fn in one READ COMMITTED transaction and commits it; an fn error
// rolls it back and is returned unchanged.
func (s *core) inTx(ctx context.Context, fn func(tx pgx.Tx) error) (err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: beginQuery})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	rollback := func() {
		// Not ctx: a canceled ctx would make pgx close the connection
		// rather than roll back. Bounded, so a dead server cannot hold us.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx) // the caller's error is the one that matters; a failed rollback is a dropped connection
	}
	// A panic in a caller's function (check, make, fn) must not leave the
	// transaction open: its connection would go on holding the key-set
	// lock for every replica.
	defer func() {
		if p := recover(); p != nil {
			rollback()
			panic(p)
		}
	}()
	if err := fn(tx); err != nil {
		rollback()
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return &commitError{err}
	}
	return nil
}

// notify sends a change announcement, delivered to listeners when the
// transaction commits (and never if it does not).
func notify(ctx context.Context, tx pgx.Tx, topic string) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify('cardsign', $1)`, topic)
	return err
}

// isUniqueViolation reports whether err is PostgreSQL's unique_violation of
// constraint.
func isUniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
}

// ProbeError is a failed Probe: Connected says whether it got as far as a
// connection (and a query then failed).
type ProbeError struct {
	Connected bool
	Err       error
}

func (e *ProbeError) Error() string { return e.Err.Error() }
func (e *ProbeError) Unwrap() error { return e.Err }

// Probe connects to the database cfg names (its password file applied, as
// Open connects) within timeout, runs a query and returns the server's
// version; it opens no pool and applies no migration. A configuration that
// does not parse is returned as is; a connection or query that fails is a
// *ProbeError.
func Probe(ctx context.Context, cfg Config, timeout time.Duration) (serverVersion string, err error) {
	poolCfg, err := ParseConfig(cfg)
	if err != nil {
		return "", err
	}
	cc := poolCfg.ConnConfig
	cc.ConnectTimeout = timeout
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return "", &ProbeError{Err: err}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		return "", &ProbeError{Connected: true, Err: err}
	}
	return conn.PgConn().ParameterStatus("server_version"), nil
}
