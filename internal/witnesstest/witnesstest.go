// Package witnesstest runs real C2SP tlog-witness witnesses for tests:
// litewitness (filippo.io/torchwood/cmd/litewitness) processes on
// loopback, each signing with a fresh Ed25519 key held by its own
// ssh-agent, with logs registered in its database the way witnessctl
// registers them.
//
// It is imported only from _test.go files.
package witnesstest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // litewitness's database, written as witnessctl would
)

// Install is the command that installs litewitness (scripts/test runs it).
const Install = "go install filippo.io/torchwood/cmd/litewitness@v0.9.0"

// startTimeout bounds a process's start: ssh-agent's socket, litewitness's
// key and listener.
const startTimeout = 15 * time.Second

// Witness is a running litewitness.
type Witness struct {
	Name string // the witness's name (its cosignature lines')
	VKey string // its cosignature/v1 verifier key, as it printed it
	URL  string // http://127.0.0.1:PORT, the prefix of its add-checkpoint endpoint

	t      testing.TB
	bin    string
	dir    string
	db     string
	agent  string // ssh-agent socket
	keyFP  string // SHA256:… fingerprint of its key
	addr   string // 127.0.0.1:PORT, kept across restarts
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	logs   *logBuffer
}

// Start runs a litewitness named name for the test, on a free loopback
// port, and stops it when the test ends. A missing litewitness or ssh tool
// fails the test with what to install.
func Start(t testing.TB, name string) *Witness {
	t.Helper()
	bin := findLitewitness(t)
	for _, tool := range []string{"ssh-agent", "ssh-add", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("witnesstest: %s not found in $PATH: install the openssh-client package (scripts/test does)", tool)
		}
	}
	// A Unix socket's path has room for 107 bytes: t.TempDir's can be
	// longer.
	dir, err := os.MkdirTemp("", "witnesstest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := &Witness{Name: name, t: t, bin: bin, dir: dir, db: filepath.Join(dir, "litewitness.db"),
		agent: filepath.Join(dir, "agent.sock"), logs: &logBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("litewitness %q's log:\n%s", name, w.logs.String())
		}
	})
	w.keyFP = w.startAgent()
	w.addr = freeAddr(t)
	w.URL = "http://" + w.addr
	w.start()
	t.Cleanup(w.stop)
	return w
}

// findLitewitness is litewitness's path: in $PATH or in $(go env GOPATH)/bin.
func findLitewitness(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("litewitness"); err == nil {
		return p
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(gopath))) {
			p := filepath.Join(dir, "bin", "litewitness")
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	t.Fatalf("witnesstest: litewitness not found in $PATH or $(go env GOPATH)/bin: install it with %q (scripts/test does)", Install)
	return ""
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startAgent runs an ssh-agent holding a fresh Ed25519 key, stopped when
// the test ends, and returns the key's fingerprint.
func (w *Witness) startAgent() string {
	t := w.t
	t.Helper()
	key := filepath.Join(w.dir, "id_ed25519")
	run(t, nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "witnesstest", "-f", key)
	agent := exec.Command("ssh-agent", "-D", "-a", w.agent)
	agent.Stdout, agent.Stderr = w.logs, w.logs
	agent.SysProcAttr = sysProcAttr()
	if err := agent.Start(); err != nil {
		t.Fatalf("witnesstest: starting ssh-agent: %v", err)
	}
	done := make(chan struct{})
	go func() { agent.Wait(); close(done) }()
	t.Cleanup(func() {
		agent.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(startTimeout)
	for {
		if c, err := net.Dial("unix", w.agent); err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			t.Fatalf("witnesstest: ssh-agent exited at start:\n%s", w.logs.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("witnesstest: ssh-agent's socket %s did not appear in %v", w.agent, startTimeout)
		}
	}
	run(t, []string{"SSH_AUTH_SOCK=" + w.agent}, "ssh-add", "-q", key)
	fields := strings.Fields(run(t, nil, "ssh-keygen", "-l", "-E", "sha256", "-f", key+".pub"))
	if len(fields) < 2 || !strings.HasPrefix(fields[1], "SHA256:") {
		t.Fatalf("witnesstest: ssh-keygen -l printed %q, not a SHA256 fingerprint", strings.Join(fields, " "))
	}
	return fields[1]
}

// run runs a tool to completion and returns its standard output.
func run(t testing.TB, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("witnesstest: %s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// start runs litewitness and waits until it printed its key and answers
// HTTP.
func (w *Witness) start() {
	t := w.t
	t.Helper()
	cmd := exec.Command(w.bin, "-name", w.Name, "-key", w.keyFP, "-ssh-agent", w.agent, "-db", w.db, "-listen", w.addr)
	cmd.Dir = w.dir
	cmd.SysProcAttr = sysProcAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("witnesstest: starting %s: %v", w.bin, err)
	}
	exited := make(chan struct{})
	vkey := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			w.logs.Write([]byte(line + "\n"))
			if v, ok := vkeyOf(line); ok {
				select {
				case vkey <- v:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(exited)
	}()
	w.mu.Lock()
	w.cmd, w.exited = cmd, exited
	w.mu.Unlock()

	deadline := time.After(startTimeout)
	select {
	case v := <-vkey:
		if w.VKey != "" && v != w.VKey {
			t.Fatalf("witnesstest: litewitness %q restarted with key %q, not %q", w.Name, v, w.VKey)
		}
		w.VKey = v
	case <-exited:
		t.Fatalf("witnesstest: litewitness %q exited at start:\n%s", w.Name, w.logs.String())
	case <-deadline:
		t.Fatalf("witnesstest: litewitness %q printed no vkey= in %v:\n%s", w.Name, startTimeout, w.logs.String())
	}
	for {
		resp, err := http.Get(w.URL + "/")
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("witnesstest: litewitness %q exited at start:\n%s", w.Name, w.logs.String())
		case <-deadline:
			t.Fatalf("witnesstest: litewitness %q does not answer on %s: %v", w.Name, w.URL, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// vkeyOf reads the verifier key from litewitness's log line
// `... msg="verifier key" vkey=KEY`.
func vkeyOf(line string) (string, bool) {
	_, v, ok := strings.Cut(line, " vkey=")
	if !ok {
		return "", false
	}
	if strings.HasPrefix(v, `"`) {
		s, err := strconv.QuotedPrefix(v)
		if err != nil {
			return "", false
		}
		v, _ = strconv.Unquote(s)
		return v, v != ""
	}
	v, _, _ = strings.Cut(v, " ")
	return v, v != ""
}

// Kill ends the witness with SIGKILL, as a crash would, and waits for it.
func (w *Witness) Kill() {
	w.t.Helper()
	w.mu.Lock()
	cmd, exited := w.cmd, w.exited
	w.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
}

// Restart kills the witness if it runs and starts it again: same database,
// same key, same port.
func (w *Witness) Restart() {
	w.t.Helper()
	w.Kill()
	w.start()
}

// Wipe kills the witness, deletes its database and starts it again: a
// witness that lost its state (logs must be added again).
func (w *Witness) Wipe() {
	w.t.Helper()
	w.Kill()
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		if err := os.Remove(w.db + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.t.Fatal(err)
		}
	}
	w.start()
}

func (w *Witness) stop() {
	w.Kill()
}

// AddLog registers the log origin, signing with the Ed25519 verifier key
// vkey (NAME+HASH+BASE64), at size 0, as `witnessctl add-log` and
// `witnessctl add-key` do: in litewitness's own tables, which it made at
// start and reads on every request.
func (w *Witness) AddLog(origin, vkey string) {
	t := w.t
	t.Helper()
	empty := sha256.Sum256(nil) // RFC 6962's hash of the empty tree, as witnessctl writes it
	w.exec(func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO log (origin, tree_size, tree_hash) VALUES (?, 0, ?)",
			origin, base64.StdEncoding.EncodeToString(empty[:])); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO key (origin, key) VALUES (?, ?)", origin, vkey)
		return err
	})
}

// Size is the size of origin's tree the witness knows (-1: the log is not
// registered).
func (w *Witness) Size(origin string) int64 {
	w.t.Helper()
	size := int64(-1)
	w.exec(func(ctx context.Context, tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, "SELECT tree_size FROM log WHERE origin = ?", origin).Scan(&size)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	return size
}

// exec runs fn in a transaction on the witness's database.
func (w *Witness) exec(fn func(ctx context.Context, tx *sql.Tx) error) {
	t := w.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	db, err := sql.Open("sqlite", "file:"+w.db+"?_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatalf("witnesstest: litewitness %q's database: %v", w.Name, err)
	}
	defer tx.Rollback()
	if err := fn(ctx, tx); err != nil {
		t.Fatalf("witnesstest: litewitness %q's database: %v", w.Name, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("witnesstest: litewitness %q's database: %v", w.Name, err)
	}
}

// logBuffer collects the processes' output for a failed test's log.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
