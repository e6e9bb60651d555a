package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/jackc/pgx/v5"
)

// query connects to url and returns the one text value sql selects.
func query(ctx context.Context, url, sql string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var v string
	err = conn.QueryRow(ctx, sql).Scan(&v)
	return v, err
}

// alive reports whether process pid exists and is not a zombie (in a
// container, PID 1 may be slow to reap a server that pg_ctl left to it).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, so look after the last ')'.
	s := string(b)
	rest := s[strings.LastIndexByte(s, ')')+1:]
	f := strings.Fields(rest)
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func TestCluster(t *testing.T) {
	ctx := t.Context()
	c, url := StartT(t, Options{})
	if _, err := c.NewDatabase(ctx, `x"; DROP`); err == nil {
		t.Fatal("NewDatabase accepted a name that needs quoting")
	}
	tests := []struct {
		name    string
		url     string
		wantErr bool
	}{
		{"tcp with password", url, false},
		{"tcp without password", c.URLWithoutPassword("db1"), true},
		{"tcp wrong password", strings.Replace(url, c.Password(), "wrong", 1), true},
		{"unix socket, trust", c.SocketURL("db1", Role), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PGPASSFILE", os.DevNull) // no ~/.pgpass of the machine's
			got, err := query(ctx, tt.url, "SELECT current_user")
			if tt.wantErr {
				if err == nil {
					t.Fatalf("connected as %s", got)
				}
				return
			}
			if err != nil || got != Role {
				t.Fatalf("current_user = %q, %v; want %s", got, err, Role)
			}
		})
	}

	// A restart keeps the data and the port.
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := query(ctx, url, "SELECT 1::text"); err == nil {
		t.Fatal("connected to a stopped server")
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.SuperExec(ctx, "db1", "CREATE TABLE IF NOT EXISTS t2 (v text)"); err != nil {
		t.Fatal(err)
	}
	if v, err := query(ctx, url, "SELECT count(*)::text FROM pg_tables WHERE tablename = 't2'"); err != nil || v != "1" {
		t.Fatalf("after restart: %q, %v", v, err)
	}

	pid, err := c.ServerPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// pg_ctl stop -w returns once postmaster.pid is gone, a moment before
	// the process itself.
	testsupport.WaitFor(t, fmt.Sprintf("server %d to be gone after Close", pid), 30*time.Second, func() bool { return !alive(pid) })
	if _, err := os.Stat(c.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cluster directory after Close: %v", err)
	}
	if err := c.Start(ctx); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

// TestWatchdog kills a process that started a cluster without letting it
// Close, as a test timeout or a crash would: the watchdog must stop the
// server and remove the directory.
func TestWatchdog(t *testing.T) {
	if os.Getenv("PGTEST_WATCHDOG_CHILD") != "" {
		watchdogChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdog$")
	cmd.Env = append(os.Environ(), "PGTEST_WATCHDOG_CHILD=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var dir string
	var pid int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "cluster "); ok {
			f := strings.Fields(d)
			dir = f[0]
			pid, _ = strconv.Atoi(f[1])
			break
		}
	}
	if dir == "" || pid == 0 {
		t.Fatalf("the child reported no cluster (%v)", sc.Err())
	}
	if !alive(pid) {
		t.Fatalf("server %d not running", pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	testsupport.WaitFor(t, fmt.Sprintf("server %d to be gone", pid), 30*time.Second, func() bool { return !alive(pid) })
	testsupport.WaitFor(t, dir+" to be gone", 30*time.Second, func() bool { _, err := os.Stat(dir); return errors.Is(err, os.ErrNotExist) })
}

func watchdogChild() {
	c, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	pid, err := c.ServerPID()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("cluster %s %d\n", c.Dir(), pid)
	time.Sleep(time.Hour) // until killed
}

func TestFindBin(t *testing.T) {
	dir, err := FindBin()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if !isExec(dir + "/" + name) {
			t.Errorf("%s/%s is not an executable", dir, name)
		}
	}
}
