package testsupport

import (
	"bufio"
	"io"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// readyLine is the line cardsignd logs once it listens, with the addresses
// it bound (the tests ask for port 0, so only this line tells them).
// Both log formats: text, and JSON (log_format: json), whose attributes
// come in the same order.
var readyLine = regexp.MustCompile(`^.*(?:msg="cardsignd ready" grpc=(\S+) http=(\S+)|"msg":"cardsignd ready","grpc":"([^"]+)","http":"([^"]+)").*$`)

// Daemon is a cardsignd process a test started and saw ready. The end-to-end
// tests of cmd/cardsignd, cmd/cardsign and deploy start it the same way and
// differ only in its arguments, environment and what they do with it.
type Daemon struct {
	Cmd        *exec.Cmd
	Ready      string      // its ready line
	GRPC, HTTP string      // where it listens, from its ready line
	Log        *SyncBuffer // all it wrote to standard error
	exited     chan struct{}
	err        error // cmd.Wait's error, once exited is closed
}

// StartDaemon starts cmd, a cardsignd perhaps run under a wrapper such as
// strace, with its standard error captured in Log, and waits up to wait for
// its ready line. A process that exits first or is not ready in time fails
// the test with its log. The process is killed when the test ends if it is
// still running.
func StartDaemon(t testing.TB, cmd *exec.Cmd, wait time.Duration) *Daemon {
	t.Helper()
	pr, pw := io.Pipe()
	d := &Daemon{Cmd: cmd, Log: &SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = io.MultiWriter(pw, d.Log)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = cmd.Wait()
		pw.Close()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			cmd.Process.Kill()
			<-d.exited
		}
	})
	ready := make(chan []string, 1)
	go func() {
		// Read to the end, even past a line too long for the scanner: an
		// unread pipe would block the daemon's logging.
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case ready <- m:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case m := <-ready:
		d.Ready, d.GRPC, d.HTTP = m[0], m[1]+m[3], m[2]+m[4]
	case <-d.exited:
		t.Fatalf("%s exited before it was ready: %v\n%s", cmd.Path, d.err, d.Log.String())
	case <-time.After(wait):
		t.Fatalf("%s not ready after %s\n%s", cmd.Path, wait, d.Log.String())
	}
	return d
}

// Exited is closed once the process has exited.
func (d *Daemon) Exited() <-chan struct{} { return d.exited }

// Err is how the process exited (cmd.Wait's error); it is valid once Exited
// is closed.
func (d *Daemon) Err() error {
	<-d.exited
	return d.err
}
