// Package pgtest runs a real, throw-away PostgreSQL cluster for tests: Debian's
// postgresql binaries, initdb into a temporary directory, a server listening
// on a Unix socket in that directory and on 127.0.0.1 at a free port, and
// everything removed afterwards.
//
// It is meant for TestMain (one cluster per test binary, a fresh database per
// test) and for tests that start built binaries against the server. Nothing
// here skips: a machine without PostgreSQL fails with a message saying what
// to install.
//
// Running as root (as CI does): initdb and postgres refuse to run as root, so
// every PostgreSQL binary runs as the "postgres" system user that Debian's
// package creates, and the cluster directory is owned by that user.
//
// Cleanup: Close stops the server and removes the directory. In case the test
// binary dies without calling Close (a panic, a -timeout, kill -9), Start
// also launches a small watchdog process that holds the read end of a pipe
// whose write end only this process has: when this process exits, however it
// exits, the pipe closes and the watchdog stops the server (pg_ctl stop -m
// immediate) and removes the directory.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Role is the login role tests connect as over TCP, with a password
// (scram-sha-256). It owns every database NewDatabase creates.
const Role = "cardsign"

// superuser is the bootstrap superuser's name; it connects through the Unix
// socket only (trust).
const superuser = "postgres"

// Options configure Start. The zero value is what most tests want.
type Options struct {
	// Dir is the parent of the cluster's temporary directory; "" means
	// os.TempDir(). When running as root it must be traversable by the
	// postgres user (/tmp is).
	Dir string
	// Log receives the output of initdb and pg_ctl; nil discards it. The
	// server's own log is in LogFile() and is quoted in start errors.
	Log io.Writer
	// Fsync keeps fsync on. Off by default: a test cluster is thrown away,
	// durability across power loss is not what tests check, and without
	// fsync a 2-core CI machine runs the suite several times faster.
	// Benchmarks that report commit rates must turn it on.
	Fsync bool
}

// Cluster is a running (or stopped) throw-away PostgreSQL cluster: the
// role, databases and URLs tests connect with, over the server process.
type Cluster struct {
	proc     *postgresProcess
	password string // of Role

	dbs atomic.Int64 // names of NewDatabase(ctx, "")
}

// Start creates and starts a cluster. The caller must Close it.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	password, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	proc, err := newPostgresProcess(opts)
	if err != nil {
		return nil, err
	}
	c := &Cluster{proc: proc, password: password}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	if err := proc.prepare(ctx, opts); err != nil {
		return nil, err
	}
	if err := proc.startOnFreePort(ctx); err != nil {
		return nil, err
	}
	if err := c.createRole(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// Start starts the server on the cluster's data directory and ports and
// waits until it accepts connections. It is called by the package's Start;
// call it again after Stop to restart the server (the "database restarted
// under load" tests).
func (c *Cluster) Start(ctx context.Context) error { return c.proc.start(ctx) }

// Stop stops the server (pg_ctl stop -m fast: open connections are
// terminated, as in a database restart). The data directory stays, so Start
// brings back the same databases on the same port.
func (c *Cluster) Stop(ctx context.Context) error { return c.proc.stop(ctx) }

// Close stops the server and removes the cluster's directory. It may be
// called more than once.
func (c *Cluster) Close() error { return c.proc.close() }

// createRole creates Role with a password, allowed to create databases.
func (c *Cluster) createRole(ctx context.Context) error {
	return c.superExec(ctx, "postgres", fmt.Sprintf("CREATE ROLE %s LOGIN CREATEDB PASSWORD '%s'", Role, c.password))
}

// superExec runs sql as the superuser over the Unix socket, in db.
func (c *Cluster) superExec(ctx context.Context, db, sql string) error {
	conn, err := pgx.Connect(ctx, c.SocketURL(db, superuser))
	if err != nil {
		return fmt.Errorf("pgtest: connect as %s through %s: %w", superuser, c.proc.sock, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgtest: %s: %w", sql, err)
	}
	return nil
}

// SuperExec runs sql as the superuser in database db: for what tests do
// behind a store's back (deleting audit rows with the guard triggers
// disabled, terminating connections).
func (c *Cluster) SuperExec(ctx context.Context, db, sql string) error {
	return c.superExec(ctx, db, sql)
}

// NewDatabase creates an empty database owned by Role and returns its URL
// (URL). An empty name picks a fresh one ("db1", "db2", ...). Names are
// letters, digits and underscores.
func (c *Cluster) NewDatabase(ctx context.Context, name string) (string, error) {
	if name == "" {
		name = "db" + strconv.FormatInt(c.dbs.Add(1), 10)
	}
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return "", fmt.Errorf("pgtest: database name %q: use letters, digits and underscores", name)
		}
	}
	if err := c.superExec(ctx, "postgres", fmt.Sprintf(`CREATE DATABASE "%s" OWNER %s`, name, Role)); err != nil {
		return "", err
	}
	return c.URL(name), nil
}

// URL returns a postgres:// URL for database db: Role with its password, over
// TCP to 127.0.0.1, sslmode=disable (the test server has no certificate).
func (c *Cluster) URL(db string) string {
	return c.tcpURL(url.UserPassword(Role, c.password), db)
}

// URLWithoutPassword is URL without the password, for tests of password
// files and PGPASSFILE.
func (c *Cluster) URLWithoutPassword(db string) string {
	return c.tcpURL(url.User(Role), db)
}

// tcpURL is the postgres:// URL of database db as user over TCP.
func (c *Cluster) tcpURL(user *url.Userinfo, db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     user,
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.proc.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// SocketURL returns a URL for database db as role through the Unix socket,
// where no password is asked (trust).
func (c *Cluster) SocketURL(db, role string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable", url.PathEscape(role), url.PathEscape(db), url.QueryEscape(c.proc.sock), c.proc.port)
}

// Password is Role's password.
func (c *Cluster) Password() string { return c.password }

// Port is the server's TCP port on 127.0.0.1.
func (c *Cluster) Port() int { return c.proc.port }

// SocketDir is the directory of the server's Unix socket.
func (c *Cluster) SocketDir() string { return c.proc.sock }

// Dir is the cluster's directory (removed by Close).
func (c *Cluster) Dir() string { return c.proc.root }

// LogFile is the server's log.
func (c *Cluster) LogFile() string { return c.proc.logFile }

// ServerPID returns the postmaster's process id while the server runs.
func (c *Cluster) ServerPID() (int, error) { return c.proc.pid() }

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return hex.EncodeToString(b), nil
}
