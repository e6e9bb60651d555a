package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// postgresProcess is a Cluster's PostgreSQL server as files and processes:
// its directory, initdb and its configuration, pg_ctl start and stop, the
// watchdog that cleans up after a test binary that died, and the server
// log. Cluster adds what tests connect with: the role, databases and URLs.
type postgresProcess struct {
	root    string // everything lives below it
	data    string // PGDATA
	sock    string // unix_socket_directories
	logFile string
	bin     string // directory of initdb, pg_ctl, postgres
	port    int    // set before the first start, then fixed
	cred    *syscall.Credential
	log     io.Writer

	mu       sync.Mutex
	running  bool
	closed   bool
	watchdog *exec.Cmd
	pipe     *os.File // write end of the watchdog's pipe
}

// newPostgresProcess finds the PostgreSQL binaries and the user to run them
// as, and makes the cluster's directory below opts.Dir; close removes it.
func newPostgresProcess(opts Options) (*postgresProcess, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	p := &postgresProcess{bin: bin, log: opts.Log}
	if p.log == nil {
		p.log = io.Discard
	}
	if p.cred, err = credential(); err != nil {
		return nil, err
	}
	if p.root, err = os.MkdirTemp(opts.Dir, "pgtest-"); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	p.data = filepath.Join(p.root, "data")
	p.sock = filepath.Join(p.root, "sock")
	p.logFile = filepath.Join(p.root, "postgres.log")
	return p, nil
}

// prepare readies the directory for the server: the socket directory, the
// watchdog, initdb and the test settings.
func (p *postgresProcess) prepare(ctx context.Context, opts Options) error {
	// A Unix socket's path has room for 107 bytes; the server's is
	// sock/.s.PGSQL.<port>.
	if n := len(p.sock) + len("/.s.PGSQL.65535"); n > 107 {
		return fmt.Errorf("pgtest: the socket path under %s would be %d bytes, over the 107 a Unix socket allows: give Options.Dir a shorter directory", p.root, n)
	}
	if err := os.Mkdir(p.sock, 0o700); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if p.cred != nil {
		for _, dir := range []string{p.root, p.sock} {
			if err := os.Chown(dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
				return fmt.Errorf("pgtest: giving %s to the postgres user: %w", dir, err)
			}
		}
	}
	if p.cred != nil {
		// t.TempDir() and the like are 0700 root directories: say so
		// rather than let initdb fail with "permission denied".
		probe := exec.Command("/bin/sh", "-c", `test -w "$1" && test -x "$1"`, "probe", p.root)
		probe.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
		probe.Dir = "/"
		if err := probe.Run(); err != nil {
			return fmt.Errorf("pgtest: the postgres user cannot use %s (running as root, PostgreSQL runs as postgres): "+
				"give Options.Dir a directory every user can traverse, such as /tmp", p.root)
		}
	}
	// The watchdog first, so that from here on nothing can be left behind.
	if err := p.startWatchdog(); err != nil {
		return err
	}
	if err := p.initdb(ctx); err != nil {
		return err
	}
	return p.configure(opts)
}

// startOnFreePort picks the server's port and starts it there. A free port
// can be taken by someone else between our probe and the server's bind; it
// tries a few.
func (p *postgresProcess) startOnFreePort(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		p.port = port
		if err = p.start(ctx); err == nil {
			return nil
		}
		if attempt == 2 || !strings.Contains(err.Error(), "could not bind") {
			return err
		}
	}
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
func (p *postgresProcess) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Dir = p.root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred}
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
func (p *postgresProcess) run(ctx context.Context, name string, args ...string) error {
	cmd := p.command(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, p.log)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgtest: %s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func (p *postgresProcess) initdb(ctx context.Context) error {
	return p.run(ctx, "initdb", "-D", p.data, "-U", superuser, "-E", "UTF8", "--locale=C",
		"--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync", "--no-instructions")
}

// configure appends the test settings to postgresql.conf, where a restart
// (Stop, Start) finds them again.
func (p *postgresProcess) configure(opts Options) error {
	conf := []string{
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = " + quoteConf(p.sock),
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
	f, err := os.OpenFile(filepath.Join(p.data, "postgresql.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	_, err = f.WriteString("\n# pgtest\n" + strings.Join(conf, "\n") + "\n")
	return errors.Join(err, f.Close())
}

func quoteConf(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// start starts the server on the data directory and ports and waits until
// it accepts connections; it does nothing if the server runs.
func (p *postgresProcess) start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("pgtest: start: the cluster is closed")
	}
	if p.running {
		return nil
	}
	err := p.run(ctx, "pg_ctl", "-D", p.data, "-l", p.logFile, "-w", "-t", "60",
		"-o", "-p "+strconv.Itoa(p.port), "start")
	if err != nil {
		return fmt.Errorf("%w\nserver log (%s):\n%s", err, p.logFile, p.logTail())
	}
	p.running = true
	return nil
}

// stop stops the server with pg_ctl stop -m fast, keeping the data
// directory.
func (p *postgresProcess) stop(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.halt(ctx, "fast")
}

// halt stops the server with pg_ctl stop -m mode. p.mu must be held.
func (p *postgresProcess) halt(ctx context.Context, mode string) error {
	if !p.running {
		return nil
	}
	if err := p.run(ctx, "pg_ctl", "-D", p.data, "-m", mode, "-w", "-t", "60", "stop"); err != nil {
		return err
	}
	p.running = false
	return nil
}

// close stops the server and removes the directory; later calls do
// nothing.
func (p *postgresProcess) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	// Not the caller's context: cleanup must happen even after it ended.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := p.halt(ctx, "fast")
	if err != nil {
		err = errors.Join(err, p.halt(ctx, "immediate"))
	}
	if p.root != "" {
		err = errors.Join(err, os.RemoveAll(p.root))
	}
	// The watchdog finds nothing left to do and exits.
	if p.pipe != nil {
		err = errors.Join(err, p.pipe.Close())
		_ = p.watchdog.Wait() // its exit status says nothing about us
	}
	return err
}

// startWatchdog starts the process that cleans up if this one dies without
// Close: it reads a pipe until EOF, which comes when every write end is
// closed, that is when Close closes ours or this process exits. It then stops
// the server and removes the directory. It runs as the cluster's user (who
// owns everything below root) in its own process group, so a ^C to go test
// does not kill it before the test binary is gone.
func (p *postgresProcess) startWatchdog() error {
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return fmt.Errorf("pgtest: watchdog: %w", err)
	}
	defer r.Close()
	script := `root=$1; pg_ctl=$2; data=$3
cat >/dev/null
"$pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1
rm -rf "$root"`
	cmd := exec.Command("/bin/sh", "-c", script, "pgtest-watchdog", p.root, filepath.Join(p.bin, "pg_ctl"), p.data)
	cmd.Dir = "/"
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("pgtest: watchdog: %w", err)
	}
	p.watchdog, p.pipe = cmd, w
	return nil
}

// logTail returns the end of the server log.
func (p *postgresProcess) logTail() string {
	b, err := os.ReadFile(p.logFile)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	const max = 4 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return strings.TrimSpace(string(b))
}

// pid returns the postmaster's process id while the server runs.
func (p *postgresProcess) pid() (int, error) {
	b, err := os.ReadFile(filepath.Join(p.data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
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
