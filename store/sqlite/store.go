// Package sqlite implements store.Store on a single SQLite file, with the
// pure-Go modernc.org/sqlite driver (no cgo).
//
// Durability: the file runs in WAL mode with synchronous=FULL, so a
// committed transaction (an audit record in particular) survives kill -9 and
// power loss. Several processes may open the same file: every write runs in a
// BEGIN IMMEDIATE transaction, so reading the audit chain head and appending
// after it cannot interleave with another writer.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/transparency"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// maxOpenConns bounds the connection pool. SQLite serializes writers anyway
// (writeSlot); the extra connections let WAL readers (ListKeys, ListAudit)
// run beside a writer.
const maxOpenConns = 4

// dsnParams are applied by the driver to every new connection, which matters:
// busy_timeout, synchronous and foreign_keys are per connection.
//   - busy_timeout: wait up to 5 s for another process's write lock.
//   - WAL: readers never block the writer, nor the writer readers.
//   - synchronous=FULL: fsync the WAL at every commit (durability).
//   - _txlock=immediate: BeginTx issues BEGIN IMMEDIATE, taking the write
//     lock up front, so a read-then-write transaction never fails with
//     SQLITE_BUSY_SNAPSHOT halfway.
const dsnParams = "_busy_timeout=5000&_journal_mode=WAL&_synchronous=FULL&_foreign_keys=on&_txlock=immediate"

// Store is a store.Store on one SQLite file. It is safe for concurrent use.
// It is composed of one part per role interface of package store (keys,
// audit log, clock, leases, documents, agents, log rows), each over the
// database handle they share (core).
type Store struct {
	*core
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
	return &Store{core: c, keys: keys{c}, auditTrail: auditTrail{c}, clock: clock{c}, leases: leases{c},
		documents: documents{c}, agents: agents{c}, logRows: logRows{c}, cosignatures: cosignatures{c},
		approvals: approvals{c}, eventCursors: eventCursors{c}}
}

// core is what the Store's parts share: the database handle and this
// process's state of it.
type core struct {
	db *sql.DB
	// writeSlot (capacity 1) queues this process's writers in Go, honouring
	// ctx, instead of in SQLite's busy handler, which polls with sleeps.
	// Other processes are still excluded by SQLite's own lock.
	writeSlot chan struct{}
	// path is the database file, named in errors that ask for disk space.
	path string
	// stmts are the audit append path's prepared statements, prepared at
	// the first append (tests open stores on older schemas) and only
	// under writeSlot.
	stmts statements
	// tail is what this Store knows of the transparency log's right end:
	// the edge of its last committed append and the tree hashes it wrote
	// or read (the inclusion proofs of new leaves read them).
	tail *transparency.Tail
	// appended is what the write transaction under way (there is one at a
	// time: writeSlot) appended to the log, for tail once it commits.
	appended transparency.Appended
	// log receives progress on long work (OpenWith's Options.Log).
	log *slog.Logger
	// full: a write found the volume full. Until a checkpoint truncates
	// the WAL, each write tries one first: once space is freed, the WAL's
	// frames go into the database and its space comes back before new
	// commits regrow it (SQLite's automatic checkpoints never truncate,
	// and do not start before the WAL reaches 1000 pages, which a small
	// volume never holds).
	full atomic.Bool
	// headStmt reads the audit head outside write transactions, prepared
	// at the first read: the log's checkpoint is served from a head read
	// on every request (replicas agree on it), and preparing the query
	// each time cost most of such a request.
	headStmt atomic.Pointer[sql.Stmt]
	// newestCardStmt reads an agent's newest card, prepared at the first
	// read: a signing policy with condition rules reads the previous card
	// on every sign.
	newestCardStmt atomic.Pointer[sql.Stmt]
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Counters = (*Store)(nil)
)

// Open opens the SQLite store at path, creating the file with mode 0600 when
// it does not exist (an existing file keeps its mode), applies any schema
// migrations it lacks, and makes every audit record appended before the
// transparency log existed a leaf of it (catchUpLog). The directory must
// exist.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWith(ctx, path, Options{})
}

// Options configure OpenWith.
type Options struct {
	// Log receives the store's progress on long work at open (making the
	// records of a log from before the transparency log leaves of it);
	// nil discards it.
	Log *slog.Logger
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, path string, o Options) (*Store, error) {
	s, err := open(ctx, path, migrationFiles)
	if err != nil {
		return nil, err
	}
	if o.Log != nil {
		s.log = o.Log
	}
	if err := s.catchUpLog(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("store: open %s: %w", path, err), s.Close())
	}
	return s, nil
}

// open is Open with the migrations taken from fsys, so tests can supply
// broken ones.
func open(ctx context.Context, path string, fsys fs.FS) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// Create the file ourselves: SQLite would create it with 0644 (less
	// umask), and the -wal and -shm files copy the database file's mode.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// A file: URI, so characters such as '?' and '#' in the path are
	// escaped rather than read as the start of the parameters.
	dsn := (&url.URL{Scheme: "file", OmitHost: true, Path: abs, RawQuery: dsnParams}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(maxOpenConns)
	db.SetMaxIdleConns(maxOpenConns)
	s := newStore(&core{db: db, writeSlot: make(chan struct{}, 1), path: abs, tail: transparency.NewTail(0), log: slog.New(slog.DiscardHandler)})
	// Switching a new file to WAL needs an exclusive lock, and SQLite does
	// not always wait for it through the busy handler: when several
	// processes open a brand-new database at once, the losers see
	// SQLITE_BUSY here. They retry for a bounded time.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.checkPragmas(ctx)
		if err == nil {
			break
		}
		if !isBusy(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return nil, errors.Join(fmt.Errorf("store: open %s: %w", path, err), db.Close())
		}
		db.SetMaxIdleConns(0) // drop the connection that failed to configure itself
		db.SetMaxIdleConns(maxOpenConns)
		time.Sleep(20 * time.Millisecond)
	}
	// A WAL left large (a reader that blocked checkpoints, a crash, a full
	// volume) is copied into the database and truncated before anything
	// else writes: on a small volume its space is what appends need.
	if err := s.checkpointAtOpen(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("store: open %s: %w", path, err), db.Close())
	}
	if err := s.migrate(ctx, fsys); err != nil {
		return nil, errors.Join(fmt.Errorf("store: open %s: %w", path, err), db.Close())
	}
	return s, nil
}

// checkPragmas confirms the connection settings took effect. journal_mode in
// particular can silently stay "delete" (e.g. on a file system without
// shared memory), and the store's concurrency story assumes WAL.
func (s *core) checkPragmas(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, p := range []struct{ name, want string }{
		{"journal_mode", "wal"},
		{"synchronous", "2"}, // FULL
		{"foreign_keys", "1"},
		{"busy_timeout", "5000"},
	} {
		var got string
		if err := conn.QueryRowContext(ctx, "PRAGMA "+p.name).Scan(&got); err != nil {
			return fmt.Errorf("pragma %s: %w", p.name, err)
		}
		if got != p.want {
			return fmt.Errorf("pragma %s is %q, want %q", p.name, got, p.want)
		}
	}
	return nil
}

// Close closes the database. Committed data is already durable.
func (s *Store) Close() error {
	// The statements belong to writers: wait for the one in flight.
	s.writeSlot <- struct{}{}
	stmtsErr := s.stmts.close()
	s.stmts = statements{}
	<-s.writeSlot
	for _, p := range []*atomic.Pointer[sql.Stmt]{&s.headStmt, &s.newestCardStmt} {
		if st := p.Swap(nil); st != nil {
			stmtsErr = errors.Join(stmtsErr, st.Close())
		}
	}
	if err := errors.Join(stmtsErr, s.db.Close()); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// write runs fn in one write transaction (BEGIN IMMEDIATE, see dsnParams) and
// commits it; an fn error rolls it back and is returned unchanged.
func (s *core) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	select {
	case s.writeSlot <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.writeSlot }()
	if s.full.Load() {
		if err := s.checkpoint(ctx); err == nil {
			s.full.Store(false)
			s.log.Info("store: space is back; the WAL was checkpointed and truncated", "path", s.path)
		}
	}
	err := s.writeTx(ctx, fn)
	if isFull(err) {
		s.full.Store(true)
		if !errors.Is(err, store.ErrFull) {
			err = fmt.Errorf("%w: %w", store.ErrFull, err)
		}
	}
	return err
}

func (s *core) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	s.appended = transparency.Appended{}
	if err := fn(tx); err != nil {
		_ = tx.Rollback() // fn's error is the one that matters; rollback cannot lose data
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.tail.Committed(s.appended)
	return nil
}

// isBusy reports whether err is SQLite's SQLITE_BUSY ("database is locked").
func isBusy(err error) bool {
	return err != nil && strings.Contains(err.Error(), "SQLITE_BUSY")
}
