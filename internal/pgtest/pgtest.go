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
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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

// Cluster is a running (or stopped) throw-away PostgreSQL cluster.
type Cluster struct {
	root     string // everything lives below it
	data     string // PGDATA
	sock     string // unix_socket_directories
	logFile  string
	bin      string // directory of initdb, pg_ctl, postgres
	port     int
	password string // of Role
	cred     *syscall.Credential
	log      io.Writer

	dbs atomic.Int64 // names of NewDatabase(ctx, "")

	mu       sync.Mutex
	running  bool
	closed   bool
	watchdog *exec.Cmd
	pipe     *os.File // write end of the watchdog's pipe
}

// Start creates and starts a cluster. The caller must Close it.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, log: opts.Log}
	if c.log == nil {
		c.log = io.Discard
	}
	if c.cred, err = credential(); err != nil {
		return nil, err
	}
	if c.root, err = os.MkdirTemp(opts.Dir, "pgtest-"); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	c.data = filepath.Join(c.root, "data")
	c.sock = filepath.Join(c.root, "sock")
	c.logFile = filepath.Join(c.root, "postgres.log")
	// A Unix socket's path has room for 107 bytes; the server's is
	// sock/.s.PGSQL.<port>.
	if n := len(c.sock) + len("/.s.PGSQL.65535"); n > 107 {
		return nil, fmt.Errorf("pgtest: the socket path under %s would be %d bytes, over the 107 a Unix socket allows: give Options.Dir a shorter directory", c.root, n)
	}
	if err := os.Mkdir(c.sock, 0o700); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if c.cred != nil {
		for _, p := range []string{c.root, c.sock} {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return nil, fmt.Errorf("pgtest: giving %s to the postgres user: %w", p, err)
			}
		}
	}
	if c.cred != nil {
		// t.TempDir() and the like are 0700 root directories: say so
		// rather than let initdb fail with "permission denied".
		probe := exec.Command("/bin/sh", "-c", `test -w "$1" && test -x "$1"`, "probe", c.root)
		probe.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
		probe.Dir = "/"
		if err := probe.Run(); err != nil {
			return nil, fmt.Errorf("pgtest: the postgres user cannot use %s (running as root, PostgreSQL runs as postgres): "+
				"give Options.Dir a directory every user can traverse, such as /tmp", c.root)
		}
	}
	// The watchdog first, so that from here on nothing can be left behind.
	if err := c.startWatchdog(); err != nil {
		return nil, err
	}
	if err := c.initdb(ctx); err != nil {
		return nil, err
	}
	c.password, err = randomHex(16)
	if err != nil {
		return nil, err
	}
	if err := c.configure(opts); err != nil {
		return nil, err
	}
	// A free port can be taken by someone else between our probe and the
	// server's bind; try a few.
	for attempt := 0; ; attempt++ {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
		if err = c.Start(ctx); err == nil {
			break
		}
		if attempt == 2 || !strings.Contains(err.Error(), "could not bind") {
			return nil, err
		}
	}
	if err := c.createRole(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// FindBin returns the directory holding initdb, pg_ctl and postgres: the
// newest /usr/lib/postgresql/N/bin (Debian keeps them off PATH), else
// initdb's directory on PATH.
func FindBin() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(matches, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(a))))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(b))))
		return vb - va
	})
	for _, m := range matches {
		dir := filepath.Dir(m)
		if isExec(filepath.Join(dir, "pg_ctl")) && isExec(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("pgtest: PostgreSQL's initdb was found neither in /usr/lib/postgresql/*/bin nor on PATH; " +
		"the tests run a real PostgreSQL server: install it (Debian/Ubuntu: apt-get install postgresql; scripts/test does this)")
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// credential returns the postgres user's credential when running as root
// (initdb and postgres refuse root), nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, so PostgreSQL must run as the postgres user, but: %w "+
			"(Debian's postgresql package creates it; or run the tests as a non-root user)", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: postgres user: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// command returns a command running a PostgreSQL binary as the cluster's
// user, in its own process group (a ^C meant for go test does not reach the
// server), with the cluster directory as working directory (the caller's
// may not be readable by the postgres user).
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	// Keep the environment from pointing the tools at another cluster.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LC_ALL=C")
	return cmd
}

// run runs a PostgreSQL tool, copying its output to the log, and returns its
// output in the error when it fails.
func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := c.command(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, c.log)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgtest: %s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func (c *Cluster) initdb(ctx context.Context) error {
	return c.run(ctx, "initdb", "-D", c.data, "-U", superuser, "-E", "UTF8", "--locale=C",
		"--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync", "--no-instructions")
}

// configure appends the test settings to postgresql.conf, where a restart
// (Stop, Start) finds them again.
func (c *Cluster) configure(opts Options) error {
	conf := []string{
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = " + quoteConf(c.sock),
		"password_encryption = 'scram-sha-256'",
		"max_connections = 200",
		// The tests' concurrency is small; these keep the server's
		// footprint small on a shared CI machine.
		"shared_buffers = '32MB'",
		"log_min_messages = warning",
		"log_line_prefix = '%m [%p] %d '",
	}
	if !opts.Fsync {
		// See Options.Fsync. full_page_writes only protects against torn
		// pages on a crash of the machine, which fsync=off gives up on.
		conf = append(conf, "fsync = off", "full_page_writes = off")
	}
	f, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	_, err = f.WriteString("\n# pgtest\n" + strings.Join(conf, "\n") + "\n")
	return errors.Join(err, f.Close())
}

func quoteConf(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Start starts the server on the cluster's data directory and ports and
// waits until it accepts connections. It is called by the package's Start;
// call it again after Stop to restart the server (the "database restarted
// under load" tests).
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("pgtest: start: the cluster is closed")
	}
	if c.running {
		return nil
	}
	err := c.run(ctx, "pg_ctl", "-D", c.data, "-l", c.logFile, "-w", "-t", "60",
		"-o", "-p "+strconv.Itoa(c.port), "start")
	if err != nil {
		return fmt.Errorf("%w\nserver log (%s):\n%s", err, c.logFile, c.logTail())
	}
	c.running = true
	return nil
}

// Stop stops the server (pg_ctl stop -m fast: open connections are
// terminated, as in a database restart). The data directory stays, so Start
// brings back the same databases on the same port.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stop(ctx, "fast")
}

func (c *Cluster) stop(ctx context.Context, mode string) error {
	if !c.running {
		return nil
	}
	if err := c.run(ctx, "pg_ctl", "-D", c.data, "-m", mode, "-w", "-t", "60", "stop"); err != nil {
		return err
	}
	c.running = false
	return nil
}

// Close stops the server and removes the cluster's directory. It may be
// called more than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	// Not the caller's context: cleanup must happen even after it ended.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.stop(ctx, "fast")
	if err != nil {
		err = errors.Join(err, c.stop(ctx, "immediate"))
	}
	if c.root != "" {
		err = errors.Join(err, os.RemoveAll(c.root))
	}
	// The watchdog finds nothing left to do and exits.
	if c.pipe != nil {
		err = errors.Join(err, c.pipe.Close())
		_ = c.watchdog.Wait() // its exit status says nothing about us
	}
	return err
}

// startWatchdog starts the process that cleans up if this one dies without
// Close: it reads a pipe until EOF, which comes when every write end is
// closed, that is when Close closes ours or this process exits. It then stops
// the server and removes the directory. It runs as the cluster's user (who
// owns everything below root) in its own process group, so a ^C to go test
// does not kill it before the test binary is gone.
func (c *Cluster) startWatchdog() error {
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return fmt.Errorf("pgtest: watchdog: %w", err)
	}
	defer r.Close()
	script := `root=$1; pg_ctl=$2; data=$3
cat >/dev/null
"$pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1
rm -rf "$root"`
	cmd := exec.Command("/bin/sh", "-c", script, "pgtest-watchdog", c.root, filepath.Join(c.bin, "pg_ctl"), c.data)
	cmd.Dir = "/"
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("pgtest: watchdog: %w", err)
	}
	c.watchdog, c.pipe = cmd, w
	return nil
}

// logTail returns the end of the server log.
func (c *Cluster) logTail() string {
	b, err := os.ReadFile(c.logFile)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	const max = 4 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return strings.TrimSpace(string(b))
}

// createRole creates Role with a password, allowed to create databases.
func (c *Cluster) createRole(ctx context.Context) error {
	return c.superExec(ctx, "postgres", fmt.Sprintf("CREATE ROLE %s LOGIN CREATEDB PASSWORD '%s'", Role, c.password))
}

// superExec runs sql as the superuser over the Unix socket, in db.
func (c *Cluster) superExec(ctx context.Context, db, sql string) error {
	conn, err := pgx.Connect(ctx, c.SocketURL(db, superuser))
	if err != nil {
		return fmt.Errorf("pgtest: connect as %s through %s: %w", superuser, c.sock, err)
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
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(Role, c.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// URLWithoutPassword is URL without the password, for tests of password
// files and PGPASSFILE.
func (c *Cluster) URLWithoutPassword(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Role),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// SocketURL returns a URL for database db as role through the Unix socket,
// where no password is asked (trust).
func (c *Cluster) SocketURL(db, role string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable", url.PathEscape(role), url.PathEscape(db), url.QueryEscape(c.sock), c.port)
}

// Password is Role's password.
func (c *Cluster) Password() string { return c.password }

// Port is the server's TCP port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// SocketDir is the directory of the server's Unix socket.
func (c *Cluster) SocketDir() string { return c.sock }

// Dir is the cluster's directory (removed by Close).
func (c *Cluster) Dir() string { return c.root }

// LogFile is the server's log.
func (c *Cluster) LogFile() string { return c.logFile }

// ServerPID returns the postmaster's process id while the server runs.
func (c *Cluster) ServerPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
