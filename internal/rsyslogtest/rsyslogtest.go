// Package rsyslogtest runs Debian's rsyslogd on loopback for tests: a real
// syslog receiver (RFC 6587 octet counting over TCP, RFC 5425 over TLS with
// its gtls driver) that writes every message it takes, raw, one per line,
// to a file.
package rsyslogtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TLS is a receiver's TLS material (files).
type TLS struct {
	CAFile, CertFile, KeyFile string
}

// Server is a running rsyslogd.
type Server struct {
	Addr string // 127.0.0.1:PORT
	Out  string // the file each message is written to, raw, one per line

	t    testing.TB
	dir  string
	conf string
	cmd  *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer
}

// Binary finds rsyslogd (/usr/sbin is not on every PATH).
func Binary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("rsyslogd"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/rsyslogd"); err == nil {
		return "/usr/sbin/rsyslogd"
	}
	t.Fatal("rsyslogd is not installed: scripts/test installs Debian's rsyslog and rsyslog-gnutls")
	return ""
}

// Start starts rsyslogd listening on a free loopback port, over TLS when
// tls is not nil, and waits until it accepts connections.
func Start(t testing.TB, tls *TLS) *Server {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	s := &Server{Addr: addr, Out: filepath.Join(dir, "messages"), t: t, dir: dir, conf: filepath.Join(dir, "rsyslog.conf")}
	var global, driver string
	if tls != nil {
		global = fmt.Sprintf(` defaultNetstreamDriverCAFile=%q defaultNetstreamDriverCertFile=%q defaultNetstreamDriverKeyFile=%q`, tls.CAFile, tls.CertFile, tls.KeyFile)
		driver = ` StreamDriver.Name="gtls" StreamDriver.Mode="1" StreamDriver.AuthMode="anon"`
	}
	conf := fmt.Sprintf(`global(workDirectory=%q%s)
module(load="imtcp"%s)
input(type="imtcp" port=%q address="127.0.0.1")
template(name="raw" type="string" string="%%rawmsg%%\n")
*.* action(type="omfile" file=%q template="raw" flushOnTXEnd="on" asyncWriting="off")
`, dir, global, driver, port, s.Out)
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	t := s.t
	t.Helper()
	s.log = &bytes.Buffer{}
	s.cmd = exec.Command(Binary(t), "-n", "-f", s.conf, "-i", filepath.Join(s.dir, "rsyslogd.pid"))
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting rsyslogd: %v", err)
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-s.done:
			t.Fatalf("rsyslogd exited: %s", s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("rsyslogd does not listen on %s: %v\n%s", s.Addr, err, s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops rsyslogd (SIGTERM), which writes what it took first.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Restart stops rsyslogd and starts it again on the same port and file.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Lines returns the messages written so far.
func (s *Server) Lines() []string {
	b, err := os.ReadFile(s.Out)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}
