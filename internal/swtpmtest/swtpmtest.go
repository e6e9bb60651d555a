// Package swtpmtest runs a software TPM 2.0 for tests, so that PKCS#11
// clients (the pkcs11 backend in-process, or cardsignd as a child process)
// generate and use keys inside a TPM through Debian's libtpm2-pkcs11-1.
//
// Start runs, all on loopback and in temporary directories, removed when
// the test ends:
//
//   - swtpm (TPM 2.0, socket mode), which sends TPM2_Startup(CLEAR) itself;
//   - a private D-Bus session bus (dbus-daemon) and on it tpm2-abrmd, the
//     TPM2 access broker and resource manager, connected to swtpm;
//   - tpm2_ptool init and addtoken, making a tpm2-pkcs11 store with one
//     token.
//
// The resource manager is not optional. A real TPM is used through one
// (the kernel's /dev/tpmrm0, or tpm2-abrmd), and libtpm2-pkcs11 and
// tpm2_ptool rely on it: the module keeps every key it has used loaded
// until logout, and tpm2_ptool's tpm2-tools commands leave their objects
// loaded; the TPM has three object slots. Reached directly through the
// swtpm TCTI, the second key a logged-in process creates fails with
// TPM_RC_OBJECT_MEMORY (0x902, "out of memory for object contexts"), and
// so does tpm2_ptool addtoken. tpm2-abrmd swaps objects in and out per
// client, and lets several processes use the TPM at once, which swtpm
// alone (one connection at a time) does not.
//
// Nothing here skips: a machine without the packages fails with a message
// naming the package to install (scripts/test installs them all).
package swtpmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TokenLabel is the label of the token Start makes.
const TokenLabel = "cardsign-tpm"

// TPM is a running software TPM with a tpm2-pkcs11 store that holds one
// token, and what a PKCS#11 client needs to use it.
type TPM struct {
	Module string // path of libtpm2_pkcs11.so.1
	Token  string // token label (TokenLabel)
	PIN    string // user PIN
	SOPIN  string // security officer PIN
	// TCTI is how the module and tpm2-tools reach the TPM: through
	// tpm2-abrmd on the private bus, "tabrmd:bus_name=...,bus_type=session"
	// (with DBUS_SESSION_BUS_ADDRESS from Env).
	TCTI  string
	Store string // the tpm2-pkcs11 store directory (TPM2_PKCS11_STORE)
	Port  int    // swtpm's TPM command port on 127.0.0.1 (control: Port+1); tpm2-abrmd holds its one connection
	// Env is KEY=VALUE for each variable the module (and tpm2-tools) read:
	// append it to a child process's environment (or use Environ), or set
	// it in-process with Setenv.
	Env []string

	dir   string
	swtpm *daemon
}

// Start starts swtpm, D-Bus and tpm2-abrmd, makes a tpm2-pkcs11 store with
// one token labelled TokenLabel with random PINs, and returns the TPM. The
// processes are stopped when t ends. Start fails t, naming the tool that
// failed and quoting its output, if any step fails.
func Start(t testing.TB) *TPM {
	t.Helper()
	begin := time.Now()
	tools := findTools(t)
	dir := t.TempDir()
	p := &TPM{
		Module: tools.module,
		Token:  TokenLabel,
		PIN:    "user-" + rand.Text()[:12],
		SOPIN:  "so-" + rand.Text()[:12],
		Store:  filepath.Join(dir, "store"),
		dir:    dir,
	}
	state := filepath.Join(dir, "state")
	for _, d := range []string{state, p.Store} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	p.startSwtpm(t, tools.swtpm, state)
	busAddr := startBus(t, tools.dbus)
	p.TCTI = "tabrmd:bus_name=com.intel.tss2.Tabrmd.t" + strings.ToLower(rand.Text()[:12]) + ",bus_type=session"
	p.Env = []string{
		"DBUS_SESSION_BUS_ADDRESS=" + busAddr,
		"TPM2_PKCS11_TCTI=" + p.TCTI,
		"TPM2_PKCS11_STORE=" + p.Store,
		// Errors only: the module warns about a store it is creating, and
		// about FAPI, which Debian builds it without.
		"TPM2_PKCS11_LOG_LEVEL=0",
		"TPM2TOOLS_TCTI=" + p.TCTI,
		// The TSS libraries' own errors stay on (they say why a TPM command
		// failed); their warnings repeat what the module reports.
		"TSS2_LOG=all+ERROR",
	}
	p.startBroker(t, tools)
	p.initStore(t, tools.ptool)
	t.Logf("swtpmtest: swtpm on 127.0.0.1:%d, token %q ready in %v", p.Port, p.Token, time.Since(begin).Round(time.Millisecond))
	return p
}

// Setenv sets each variable of Env with t.Setenv, for tests that load the
// module in-process: the module reads them at C_Initialize. Like t.Setenv,
// it cannot be used in parallel tests.
func (p *TPM) Setenv(t testing.TB) {
	t.Helper()
	for _, kv := range p.Env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Environ returns os.Environ() without the variables that point a process
// at another TPM, store or bus, plus Env: the environment of a child
// process that uses this TPM.
func (p *TPM) Environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !ownVar(kv) {
			env = append(env, kv)
		}
	}
	return append(env, p.Env...)
}

// ownVar reports whether kv is one of the variables Env sets or that would
// change what they mean.
func ownVar(kv string) bool {
	for _, prefix := range []string{"TPM2_PKCS11_", "TSS2_", "TPM2TOOLS_", "DBUS_SESSION_BUS_ADDRESS="} {
		if strings.HasPrefix(kv, prefix) {
			return true
		}
	}
	return false
}

// tools are the programs and libraries Start needs.
type tools struct {
	swtpm, dbus, abrmd, ptool, getcap string
	module                            string
}

// findTools finds every program and library Start needs, or fails t with
// the packages to install for all that are missing.
func findTools(t testing.TB) tools {
	t.Helper()
	var missing []string
	cmd := func(name, pkg string, dirs ...string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, d := range dirs { // sbin is not on every PATH
			if p := filepath.Join(d, name); isExec(p) {
				return p
			}
		}
		missing = append(missing, fmt.Sprintf("%s (apt-get install %s)", name, pkg))
		return ""
	}
	lib := func(what, pkg string, patterns ...string) string {
		for _, pat := range patterns {
			if m, _ := filepath.Glob(pat); len(m) > 0 {
				return m[0]
			}
		}
		missing = append(missing, fmt.Sprintf("%s, looked for at %s (apt-get install %s)", what, strings.Join(patterns, ", "), pkg))
		return ""
	}
	libPatterns := func(name string) []string {
		return []string{"/usr/lib/*-linux-gnu/" + name, "/usr/lib64/" + name, "/usr/local/lib/" + name}
	}
	tl := tools{
		swtpm:  cmd("swtpm", "swtpm"),
		dbus:   cmd("dbus-daemon", "dbus-daemon"),
		abrmd:  cmd("tpm2-abrmd", "tpm2-abrmd", "/usr/sbin", "/usr/local/sbin"),
		ptool:  cmd("tpm2_ptool", "libtpm2-pkcs11-tools"),
		getcap: cmd("tpm2_getcap", "tpm2-tools"),
		module: lib("the tpm2-pkcs11 module libtpm2_pkcs11.so.1", "libtpm2-pkcs11-1", libPatterns("libtpm2_pkcs11.so.1")...),
	}
	// The TCTIs are loaded by name at run time: without them the error is
	// the TSS loader's, which does not name the package.
	lib("the TSS TCTI for tpm2-abrmd", "libtss2-tcti-tabrmd0", libPatterns("libtss2-tcti-tabrmd.so.0")...)
	lib("the TSS TCTI for swtpm", "libtss2-tcti-swtpm0", libPatterns("libtss2-tcti-swtpm.so.0")...)
	if len(missing) > 0 {
		t.Fatalf("swtpmtest: the TPM tests need software that is not installed (scripts/test installs it):\n  %s", strings.Join(missing, "\n  "))
	}
	return tl
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// startSwtpm starts swtpm on two adjacent free ports (TCTIs take the
// control channel to be on the command port + 1) and waits until the TPM
// answers. The control port is bound here and handed over as a file
// descriptor; the command port is bound by swtpm, so another process may
// take it in between: then it tries other ports.
func (p *TPM) startSwtpm(t testing.TB, bin, state string) {
	t.Helper()
	const attempts = 5
	for attempt := 1; ; attempt++ {
		err := p.trySwtpm(bin, state)
		if err == nil {
			break
		}
		if attempt == attempts || !strings.Contains(err.Error(), "in use") {
			t.Fatalf("swtpmtest: starting swtpm: %v", err)
		}
	}
	t.Cleanup(p.swtpm.stop)
}

// trySwtpm is one attempt of startSwtpm.
func (p *TPM) trySwtpm(bin, state string) error {
	data, ctrl, err := adjacentPorts()
	if err != nil {
		return err
	}
	ctrlFile, err := ctrl.File()
	ctrl.Close()
	if err != nil {
		data.Close()
		return err
	}
	defer ctrlFile.Close()
	p.Port = data.Addr().(*net.TCPAddr).Port
	data.Close()

	d, err := startDaemon("swtpm", bin, nil, []*os.File{ctrlFile}, "socket", "--tpm2",
		"--tpmstate", "dir="+state,
		"--server", "type=tcp,port="+strconv.Itoa(p.Port)+",bindaddr=127.0.0.1",
		"--ctrl", "type=tcp,fd=3",
		"--flags", "not-need-init,startup-clear")
	if err != nil {
		return err
	}
	err = d.waitReady(func() error { return p.ping() })
	if err != nil {
		return err
	}
	p.swtpm = d
	return nil
}

// adjacentPorts returns listeners on loopback ports P and P+1.
func adjacentPorts() (data, ctrl *net.TCPListener, err error) {
	for range 50 {
		l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if port < 65535 {
			c, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port + 1})
			if err == nil {
				return l, c, nil
			}
		}
		l.Close()
	}
	return nil, nil, errors.New("no two adjacent free ports on 127.0.0.1 in 50 tries")
}

// dbusConfig is a session bus for tpm2-abrmd and its clients, on a socket
// only this user can reach.
const dbusConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`

// startBus starts a private D-Bus session bus and returns its address.
// Its socket is in a directory of its own under os.TempDir(), as a Unix
// socket's path has room for 107 bytes and t.TempDir() is named after the
// test.
func startBus(t testing.TB, bin string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "swtpmtest-bus-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "bus")
	conf := filepath.Join(dir, "session.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, dbusConfig, sock), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := startDaemon("dbus-daemon", bin, nil, nil, "--config-file="+conf, "--nofork", "--nopidfile")
	if err != nil {
		t.Fatalf("swtpmtest: %v", err)
	}
	t.Cleanup(d.stop)
	err = d.waitReady(func() error {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("swtpmtest: %v", err)
	}
	return "unix:path=" + sock
}

// startBroker starts tpm2-abrmd on the bus, connected to swtpm, and waits
// until a client reaches the TPM through it.
func (p *TPM) startBroker(t testing.TB, tl tools) {
	t.Helper()
	name, _, _ := strings.Cut(strings.TrimPrefix(p.TCTI, "tabrmd:bus_name="), ",")
	args := []string{"--session", "--dbus-name=" + name, "--flush-all", "--logger=stdout",
		"--tcti=swtpm:host=127.0.0.1,port=" + strconv.Itoa(p.Port)}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-root") // it refuses root otherwise
	}
	d, err := startDaemon("tpm2-abrmd", tl.abrmd, p.Environ(), nil, args...)
	if err != nil {
		t.Fatalf("swtpmtest: %v", err)
	}
	t.Cleanup(d.stop)
	var out []byte
	err = d.waitReady(func() error {
		cmd := exec.Command(tl.getcap, "properties-fixed")
		cmd.Env = p.Environ()
		var err error
		if out, err = cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("tpm2_getcap through it: %v: %s", err, bytes.TrimSpace(out))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("swtpmtest: %v%s", err, p.swtpm.logTail())
	}
}

// initStore makes the store (tpm2_ptool init: a primary key, persistent in
// the TPM) and the token (tpm2_ptool addtoken).
func (p *TPM) initStore(t testing.TB, ptool string) {
	t.Helper()
	out := p.run(t, ptool, "init", "--path", p.Store)
	m := regexp.MustCompile(`(?m)^id: (\d+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("swtpmtest: tpm2_ptool init printed no primary object id:\n%s", out)
	}
	p.run(t, ptool, "addtoken", "--pid", m[1], "--label", p.Token, "--sopin", p.SOPIN, "--userpin", p.PIN, "--path", p.Store)
}

// run runs a tool with the TPM's environment and returns its standard
// output, or fails t quoting its output (and the PINs replaced).
func (p *TPM) run(t testing.TB, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = p.Environ()
	cmd.Dir = p.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		hide := strings.NewReplacer(p.PIN, "<user PIN>", p.SOPIN, "<SO PIN>")
		t.Fatalf("swtpmtest: %s %s: %v\nstdout: %s\nstderr: %s", filepath.Base(bin), hide.Replace(strings.Join(args, " ")), err,
			hide.Replace(strings.TrimSpace(stdout.String())), hide.Replace(strings.TrimSpace(stderr.String())))
	}
	return stdout.String()
}

// daemon is a process Start runs until the test ends.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *syncBuffer
}

// startDaemon starts bin with env (nil: this process's) and extra files
// (fd 3 on), its output collected, killed if this process dies.
func startDaemon(name, bin string, env []string, files []*os.File, args ...string) (*daemon, error) {
	d := &daemon{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{}), log: &syncBuffer{}}
	d.cmd.Env = env
	d.cmd.ExtraFiles = files
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	return d, nil
}

// waitReady calls ready until it succeeds, the daemon exits or 15s pass.
// A daemon that is not ready is stopped.
func (d *daemon) waitReady(ready func() error) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-d.done:
			return fmt.Errorf("%s exited (%v): %s", d.name, d.cmd.ProcessState, strings.TrimSpace(d.log.String()))
		default:
		}
		err := ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			d.stop()
			return fmt.Errorf("%s is not ready after 15s: %v%s", d.name, err, d.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop stops the daemon: SIGTERM, then SIGKILL after 5s.
func (d *daemon) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// logTail is the daemon's output so far, as the tail of an error message.
func (d *daemon) logTail() string {
	if s := strings.TrimSpace(d.log.String()); s != "" {
		return "\n" + d.name + ": " + s
	}
	return ""
}
