// Package systemd holds cardsignd's systemd unit (cardsignd.service), its
// system user (cardsignd.sysusers), its configuration directory
// (cardsignd.tmpfiles) and a drop-in for PKCS#11 hardware
// (cardsignd.service.d/pkcs11.conf.example). These tests check them with
// systemd's own tools and run the real cardsignd the way the unit starts it.
//
// No systemd runs here (nor in CI), so the sandbox itself is not applied:
// the unit is checked by `systemd-analyze verify` (syntax, values, the
// executables exist), by `systemd-analyze security --offline` (the exposure
// score), by a table of the settings it must keep, and its system call
// filter and address families against every call and socket cardsignd
// makes under strace while it starts, signs, serves, reloads and stops
// (with the mappings MemoryDenyWriteExecute= and the namespaces
// RestrictNamespaces= would refuse).
package systemd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/daemonconfig"
	"github.com/cardsign/cardsign/internal/testbin"
	"github.com/cardsign/cardsign/internal/testsupport"
)

var (
	daemonBin, cliBin string
	repoRoot          = testbin.RepoRoot()
	here              = filepath.Join(repoRoot, "deploy", "systemd")
)

func TestMain(m *testing.M) {
	testbin.Main(m, map[string]*string{"../../cmd/cardsignd": &daemonBin, "../../cmd/cardsign": &cliBin})
}

// maxExposure is the highest `systemd-analyze security` exposure the unit
// may have. Measured: 1.1 with systemd 252 (Debian 12); the rest is room
// for newer systemd versions weighing their checks differently. Losing any
// one setting is caught by TestSystemdUnitSettings, not by this figure.
const maxExposure = 1.5

// need returns the path of a tool the tests cannot do without, or ends the
// test saying how to get it.
func need(t *testing.T, tool, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s is not installed: run scripts/test, which installs it (apt-get install %s) (%v)", tool, pkg, err)
	}
	return path
}

// shippedUnit is cardsignd.service with ExecStart pointing at the cardsignd
// built for the test (verify wants the executable to exist).
func shippedUnit(t *testing.T) string {
	t.Helper()
	unit := testsupport.ReadFile(t, filepath.Join(here, "cardsignd.service"))
	const execStart = "\nExecStart=/usr/bin/cardsignd "
	if strings.Count(unit, execStart) != 1 {
		t.Fatalf("cardsignd.service has no %q line", execStart)
	}
	return strings.Replace(unit, execStart, "\nExecStart="+daemonBin+" ", 1)
}

// replaceLine replaces the one line of text that is exactly old.
func replaceLine(t *testing.T, text, old, new string) string {
	t.Helper()
	lines := strings.Split(text, "\n")
	found := 0
	for i, line := range lines {
		if line == old {
			lines[i] = new
			found++
		}
	}
	if found != 1 {
		t.Fatalf("%d lines %q, want 1", found, old)
	}
	return strings.Join(lines, "\n")
}

// writeUnit writes a unit, and drop-ins by name, in a directory of their
// own, and returns the unit's path.
func writeUnit(t *testing.T, unit string, dropIns map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "cardsignd.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range dropIns {
		if err := os.MkdirAll(filepath.Join(dir, "cardsignd.service.d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cardsignd.service.d", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// verify runs `systemd-analyze verify` on a unit. systemd reports an
// unknown key or a bad value as a warning and still exits 0, so any line
// naming the unit's directory is a failure too.
func verify(t *testing.T, unitPath string) error {
	t.Helper()
	out, err := exec.Command(need(t, "systemd-analyze", "systemd"), "verify", unitPath).CombinedOutput()
	var about []string
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.Contains(line, filepath.Dir(unitPath)) || strings.Contains(line, "cardsignd.service") {
			about = append(about, line)
		}
	}
	switch {
	case err != nil:
		return fmt.Errorf("systemd-analyze verify: %v\n%s", err, out)
	case len(about) > 0:
		return fmt.Errorf("systemd-analyze verify warns:\n%s", strings.Join(about, "\n"))
	}
	return nil
}

// TestSystemdUnitVerify: the unit, alone and with the PKCS#11 drop-in, passes
// `systemd-analyze verify`; a misspelt key, a bad value, a missing
// executable or a broken drop-in does not.
func TestSystemdUnitVerify(t *testing.T) {
	unit := shippedUnit(t)
	pkcs11 := testsupport.ReadFile(t, filepath.Join(here, "cardsignd.service.d", "pkcs11.conf.example"))
	// The drop-in with every optional line on.
	pkcs11All := regexp.MustCompile(`(?m)^#((?:DeviceAllow|SupplementaryGroups|PrivateUsers|ReadWritePaths)=)`).ReplaceAllString(pkcs11, "$1")
	if pkcs11All == pkcs11 {
		t.Fatal("pkcs11.conf.example has no commented optional line left to check")
	}
	cases := []struct {
		name    string
		unit    string
		dropIns map[string]string
		ok      bool
	}{
		{"shipped", unit, nil, true},
		{"with the pkcs11 drop-in", unit, map[string]string{"pkcs11.conf": pkcs11}, true},
		{"with every pkcs11 option", unit, map[string]string{"pkcs11.conf": pkcs11All}, true},
		{"misspelt key", replaceLine(t, unit, "ProtectSystem=strict", "ProtectSytem=strict"), nil, false},
		{"bad value", replaceLine(t, unit, "Type=notify", "Type=notifyy"), nil, false},
		{"missing executable", strings.Replace(unit, "ExecStart="+daemonBin, "ExecStart=/nonexistent/cardsignd", 1), nil, false},
		{"broken drop-in", unit, map[string]string{"pkcs11.conf": pkcs11 + "DeviceAlow=/dev/k7pf0 rw\n"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name != "shipped" && c.unit == unit && c.dropIns == nil {
				t.Fatal("the case changes nothing")
			}
			err := verify(t, writeUnit(t, c.unit, c.dropIns))
			if c.ok && err != nil {
				t.Fatal(err)
			}
			if !c.ok && err == nil {
				t.Fatal("systemd-analyze verify passed a broken unit")
			}
			if err != nil {
				t.Log(err)
			}
		})
	}
}

// exposure runs `systemd-analyze security --offline` and returns the overall
// exposure and the names of the checks the unit fails.
func exposure(t *testing.T, unitPath string) (float64, []string) {
	t.Helper()
	sa := need(t, "systemd-analyze", "systemd")
	out, err := exec.Command(sa, "security", "--offline=true", unitPath).Output()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no overall exposure in:\n%s", out)
	}
	score, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	js, err := exec.Command(sa, "security", "--offline=true", "--json=short", unitPath).Output()
	if err != nil {
		t.Fatalf("systemd-analyze security --json: %v\n%s", err, js)
	}
	var checks []struct {
		Set      bool    `json:"set"`
		Name     string  `json:"name"`
		Exposure *string `json:"exposure"` // "0.1", or null when passed
	}
	if err := json.Unmarshal(js, &checks); err != nil {
		t.Fatalf("systemd-analyze security --json: %v\n%s", err, js)
	}
	var failed []string
	for _, c := range checks {
		if !c.Set && c.Exposure != nil {
			failed = append(failed, c.Name+" "+*c.Exposure)
		}
	}
	return score, failed
}

// TestSystemdUnitSecurity: the unit's exposure is at most maxExposure; the
// same unit without its sandbox lines is far above it.
func TestSystemdUnitSecurity(t *testing.T) {
	unit := shippedUnit(t)
	score, failed := exposure(t, writeUnit(t, unit, nil))
	t.Logf("systemd-analyze security --offline: exposure %.1f; open: %s", score, strings.Join(failed, ", "))
	if score > maxExposure {
		t.Fatalf("exposure %.1f is above %.1f; open: %s", score, maxExposure, strings.Join(failed, ", "))
	}

	pkcs11 := testsupport.ReadFile(t, filepath.Join(here, "cardsignd.service.d", "pkcs11.conf.example"))
	withHSM, failed := exposure(t, writeUnit(t, unit, map[string]string{"pkcs11.conf": pkcs11}))
	t.Logf("with pkcs11.conf: exposure %.1f; open: %s", withHSM, strings.Join(failed, ", "))
	if withHSM > maxExposure {
		t.Fatalf("with the pkcs11 drop-in, exposure %.1f is above %.1f; open: %s", withHSM, maxExposure, strings.Join(failed, ", "))
	}

	start, end := strings.Index(unit, "# Sandbox."), strings.Index(unit, "[Install]")
	if start < 0 || end < start {
		t.Fatal("cardsignd.service has no \"# Sandbox.\" part before [Install]")
	}
	bare, _ := exposure(t, writeUnit(t, unit[:start]+unit[end:], nil))
	if bare <= maxExposure {
		t.Fatalf("without its sandbox lines the unit still scores %.1f: the check could not fail", bare)
	}
}

// unitFile is a parsed unit: each section's assignments, in order.
type unitFile map[string][][2]string

func parseUnit(text string) unitFile {
	u := unitFile{}
	section := ""
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		default:
			k, v, _ := strings.Cut(line, "=")
			u[section] = append(u[section], [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	return u
}

// values returns every value given to key in section, in order.
func (u unitFile) values(section, key string) []string {
	var out []string
	for _, kv := range u[section] {
		if kv[0] == key {
			out = append(out, kv[1])
		}
	}
	return out
}

// last is the value systemd applies for a single-valued key.
func (u unitFile) last(section, key string) (string, bool) {
	v := u.values(section, key)
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// required is what the unit must say, setting by setting: the issue's
// hardening list and what cardsignd relies on.
var required = map[string]string{
	"Type":                    "notify",
	"ExecReload":              "/bin/kill -HUP $MAINPID",
	"Restart":                 "on-failure",
	"User":                    "cardsignd",
	"Group":                   "cardsignd",
	"StateDirectory":          "cardsignd",
	"StateDirectoryMode":      "0700",
	"ConfigurationDirectory":  "cardsignd",
	"UMask":                   "0077",
	"LimitNOFILE":             "65536",
	"LimitCORE":               "0",
	"NoNewPrivileges":         "yes",
	"CapabilityBoundingSet":   "",
	"AmbientCapabilities":     "",
	"ProtectSystem":           "strict",
	"ProtectHome":             "yes",
	"PrivateTmp":              "yes",
	"PrivateDevices":          "yes",
	"PrivateUsers":            "yes",
	"ProtectKernelTunables":   "yes",
	"ProtectKernelModules":    "yes",
	"ProtectKernelLogs":       "yes",
	"ProtectControlGroups":    "yes",
	"ProtectClock":            "yes",
	"ProtectHostname":         "yes",
	"ProtectProc":             "invisible",
	"ProcSubset":              "pid",
	"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
	"RestrictNamespaces":      "yes",
	"RestrictRealtime":        "yes",
	"RestrictSUIDSGID":        "yes",
	"LockPersonality":         "yes",
	"MemoryDenyWriteExecute":  "yes",
	"SystemCallArchitectures": "native",
	"SystemCallErrorNumber":   "EPERM",
}

// checkSettings returns what is wrong with a unit's [Service] section.
func checkSettings(u unitFile, sysusers string) []string {
	var bad []string
	for key, want := range required {
		if got, ok := u.last("Service", key); !ok {
			bad = append(bad, fmt.Sprintf("%s= is missing (want %s=%s)", key, key, want))
		} else if got != want {
			bad = append(bad, fmt.Sprintf("%s=%s, want %s=%s", key, got, key, want))
		}
	}
	if got := u.values("Service", "SystemCallFilter"); !slices.Equal(got, []string{"@system-service", "~@privileged @resources"}) {
		bad = append(bad, fmt.Sprintf("SystemCallFilter= %q, want @system-service, then ~@privileged @resources", got))
	}
	// The drain: shutdown_timeout for the calls in flight, 5s for HTTP and
	// the audit log, and a margin before systemd's SIGKILL.
	stop, _ := u.last("Service", "TimeoutStopSec")
	if d, err := time.ParseDuration(stop); err != nil || d < daemonconfig.Defaults().ShutdownTimeout+10*time.Second {
		bad = append(bad, fmt.Sprintf("TimeoutStopSec=%s: want at least shutdown_timeout (%s) + 10s", stop, daemonconfig.Defaults().ShutdownTimeout))
	}
	// ExecStart: the binary, the config file in ConfigurationDirectory=, the
	// data in StateDirectory=. TestSystemdSandboxCalls runs this very line.
	if got, _ := u.last("Service", "ExecStart"); got != "/usr/bin/cardsignd --config /etc/cardsignd/cardsignd.yaml --data-dir ${STATE_DIRECTORY}" {
		bad = append(bad, "ExecStart="+got)
	}
	// The user the unit names is the one sysusers creates.
	user, _ := u.last("Service", "User")
	if !regexp.MustCompile(`(?m)^u\s+` + regexp.QuoteMeta(user) + `\s`).MatchString(sysusers) {
		bad = append(bad, "cardsignd.sysusers does not create User="+user)
	}
	sort.Strings(bad)
	return bad
}

// TestSystemdUnitSettings: every hardening setting is there with its value;
// dropping or weakening one is caught.
func TestSystemdUnitSettings(t *testing.T) {
	unit := testsupport.ReadFile(t, filepath.Join(here, "cardsignd.service"))
	sysusers := testsupport.ReadFile(t, filepath.Join(here, "cardsignd.sysusers"))
	if bad := checkSettings(parseUnit(unit), sysusers); len(bad) > 0 {
		t.Fatalf("cardsignd.service:\n%s", strings.Join(bad, "\n"))
	}
	for _, mutate := range [][2]string{
		{"PrivateUsers=yes", ""},
		{"ProtectSystem=strict", "ProtectSystem=full"},
		{"CapabilityBoundingSet=", "CapabilityBoundingSet=CAP_NET_BIND_SERVICE"},
		{"TimeoutStopSec=45s", "TimeoutStopSec=30s"},
		{"SystemCallFilter=~@privileged @resources", ""},
		{"ExecStart=/usr/bin/cardsignd --config /etc/cardsignd/cardsignd.yaml --data-dir ${STATE_DIRECTORY}",
			"ExecStart=/usr/bin/cardsignd --config /etc/cardsignd/cardsignd.yaml --data-dir /var/lib/cardsignd"},
		{"Type=notify", "Type=simple"},
	} {
		if bad := checkSettings(parseUnit(replaceLine(t, unit, mutate[0], mutate[1])), sysusers); len(bad) == 0 {
			t.Errorf("replacing %q with %q goes unnoticed", mutate[0], mutate[1])
		}
	}
	if bad := checkSettings(parseUnit(unit), strings.ReplaceAll(sysusers, "u cardsignd", "u cardsign")); len(bad) == 0 {
		t.Error("a sysusers file creating another user goes unnoticed")
	}
}

// TestSystemdSysusersTmpfiles: systemd-sysusers creates the unit's user as a
// system user without a login shell, and systemd-tmpfiles makes
// /etc/cardsignd root-owned, readable by that user's group only; both in a
// scratch root.
func TestSystemdSysusersTmpfiles(t *testing.T) {
	sysusers := need(t, "systemd-sysusers", "systemd")
	tmpfiles := need(t, "systemd-tmpfiles", "systemd")
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sysusers, "--root="+root, filepath.Join(here, "cardsignd.sysusers")).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	var uid, gid int
	for line := range strings.SplitSeq(testsupport.ReadFile(t, filepath.Join(root, "etc", "passwd")), "\n") {
		f := strings.Split(line, ":")
		if len(f) != 7 || f[0] != "cardsignd" {
			continue
		}
		uid, _ = strconv.Atoi(f[2])
		gid, _ = strconv.Atoi(f[3])
		if uid <= 0 || uid >= 1000 || f[5] != "/var/lib/cardsignd" || !strings.HasSuffix(f[6], "nologin") {
			t.Fatalf("cardsignd user: %q: want a system UID (1-999), home /var/lib/cardsignd, no login shell", line)
		}
	}
	if uid == 0 {
		t.Fatalf("systemd-sysusers made no cardsignd user:\n%s", testsupport.ReadFile(t, filepath.Join(root, "etc", "passwd")))
	}
	if os.Geteuid() != 0 {
		cantRun := t.Skipf
		if os.Getenv("CI") != "" {
			cantRun = t.Fatalf
		}
		cantRun("systemd-tmpfiles needs root to give /etc/cardsignd its group (CI runs the tests as root)")
	}
	if out, err := exec.Command(tmpfiles, "--root="+root, "--create", filepath.Join(here, "cardsignd.tmpfiles")).CombinedOutput(); err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, out)
	}
	for _, dir := range []string{"etc/cardsignd", "etc/cardsignd/tls"} {
		fi, err := os.Stat(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != 0o750 || st.Uid != 0 || int(st.Gid) != gid {
			t.Fatalf("/%s: mode %v owner %d:%d, want 0750 root:cardsignd (0:%d)", dir, fi.Mode().Perm(), st.Uid, st.Gid, gid)
		}
	}
}

// filterSets expands systemd's system call groups (`systemd-analyze
// syscall-filter`) into their calls.
func filterSets(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command(need(t, "systemd-analyze", "systemd"), "syscall-filter").Output()
	if err != nil {
		t.Fatalf("systemd-analyze syscall-filter: %v", err)
	}
	raw := map[string][]string{}
	group := ""
	for line := range strings.SplitSeq(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "@"):
			group = strings.TrimSpace(line)
		case strings.HasPrefix(line, "    ") && group != "":
			if item := strings.TrimSpace(line); item != "" && item[0] != '#' {
				raw[group] = append(raw[group], item)
			}
		case strings.TrimSpace(line) == "":
			group = ""
		}
	}
	if len(raw["@system-service"]) == 0 || len(raw["@default"]) == 0 {
		t.Fatalf("no @system-service or @default in systemd-analyze syscall-filter:\n%s", out)
	}
	sets := map[string][]string{}
	var expand func(string, map[string]bool) []string
	expand = func(g string, seen map[string]bool) []string {
		if seen[g] {
			return nil
		}
		seen[g] = true
		var calls []string
		for _, item := range raw[g] {
			if strings.HasPrefix(item, "@") {
				calls = append(calls, expand(item, seen)...)
			} else {
				calls = append(calls, item)
			}
		}
		return calls
	}
	for g := range raw {
		sets[g] = expand(g, map[string]bool{})
	}
	return sets
}

// deniedCalls applies SystemCallFilter= lines as systemd does (the first
// line sets an allow list, which starts with @default, or a deny list; the
// next add to or take from it) and returns the used calls it refuses.
func deniedCalls(t *testing.T, lines []string, used []string, sets map[string][]string) []string {
	t.Helper()
	resolve := func(item string) []string {
		item, _, _ = strings.Cut(item, ":") // name:errno
		if strings.HasPrefix(item, "@") {
			calls, ok := sets[item]
			if !ok {
				t.Fatalf("unknown system call group %s", item)
			}
			return calls
		}
		return []string{item}
	}
	listed := map[string]bool{}
	allowList, started := false, false
	for _, line := range lines {
		invert := strings.HasPrefix(line, "~")
		if !started {
			started, allowList = true, !invert
			if allowList {
				for _, c := range sets["@default"] {
					listed[c] = true
				}
			}
		}
		add := invert != allowList // allow list: plain lines add; deny list: ~ lines add
		for _, item := range strings.Fields(strings.TrimPrefix(line, "~")) {
			for _, c := range resolve(item) {
				listed[c] = add
			}
		}
	}
	var denied []string
	for _, c := range used {
		if listed[c] != allowList {
			denied = append(denied, c)
		}
	}
	return denied
}

// traced is what a cardsignd run under strace did.
type traced struct {
	calls    []string // system call names, sorted, once each
	families []string // socket address families, sorted, once each
	// wx: calls MemoryDenyWriteExecute= refuses (a mapping both writable
	// and executable, or made executable later); namespaces: calls
	// RestrictNamespaces= refuses.
	wx, namespaces []string
}

var (
	traceCall   = regexp.MustCompile(`^\d+\s+([a-z_][a-z0-9_]*)\(`)
	traceSocket = regexp.MustCompile(`^\d+\s+socket(?:pair)?\((AF_[A-Z0-9]+)`)
	traceWX     = regexp.MustCompile(`^\d+\s+(?:mmap\(.*PROT_WRITE\|PROT_EXEC|mmap\(.*PROT_EXEC\|PROT_WRITE|(?:pkey_)?mprotect\(.*PROT_EXEC|shmat\(.*SHM_EXEC)`)
	traceNS     = regexp.MustCompile(`^\d+\s+(?:clone3?\(.*CLONE_NEW|unshare\(|setns\()`)
)

func parseTrace(t *testing.T, path string) traced {
	t.Helper()
	calls, families := map[string]bool{}, map[string]bool{}
	var tr traced
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := traceCall.FindStringSubmatch(sc.Text()); m != nil {
			calls[m[1]] = true
		}
		if m := traceSocket.FindStringSubmatch(sc.Text()); m != nil {
			families[m[1]] = true
		}
		if traceWX.MatchString(sc.Text()) {
			tr.wx = append(tr.wx, sc.Text())
		}
		if traceNS.MatchString(sc.Text()) {
			tr.namespaces = append(tr.namespaces, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for c := range calls {
		tr.calls = append(tr.calls, c)
	}
	for f := range families {
		tr.families = append(tr.families, f)
	}
	sort.Strings(tr.calls)
	sort.Strings(tr.families)
	return tr
}

// TestSystemdSandboxCalls runs cardsignd with the unit's own ExecStart line
// (the built binary, a scratch config and state directory) and
// NOTIFY_SOCKET, under strace: it starts, signs a card, serves the JWKS,
// health and metrics, reloads on SIGHUP and drains on SIGTERM. Every system
// call it made must pass the unit's SystemCallFilter=, and every socket it
// opened RestrictAddressFamilies=. The same trace against a filter without
// @network-io must fail, so the check can.
func TestSystemdSandboxCalls(t *testing.T) {
	strace := need(t, "strace", "strace")
	unit := parseUnit(testsupport.ReadFile(t, filepath.Join(here, "cardsignd.service")))
	work, err := os.MkdirTemp("", "cardsignd-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	state := filepath.Join(work, "state")
	config := filepath.Join(work, "cardsignd.yaml")
	if err := os.WriteFile(config, []byte("grpc_addr: 127.0.0.1:0\nhttp_addr: 127.0.0.1:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(work, "notify"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	trace := filepath.Join(work, "trace")
	bin := daemonBin
	prefix := []string{strace}
	// Not as root, like the unit's User=: as root, SQLite gives its journal
	// files the database's owner (fchown, which @privileged refuses; it
	// does so only when its effective UID is 0). Root drops to nobody,
	// without capabilities and with no_new_privs, as the unit would; the
	// binary, the scratch directory and the socket are made its own.
	if os.Geteuid() == 0 {
		const nobody = 65534
		bin = filepath.Join(work, "cardsignd")
		copyFile(t, daemonBin, bin)
		for _, p := range []string{work, bin, config, notify.LocalAddr().String()} {
			if err := os.Chown(p, nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}
		prefix = []string{need(t, "setpriv", "util-linux"), "--reuid=65534", "--regid=65534", "--clear-groups",
			"--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--", strace}
	}
	execStart, _ := unit.last("Service", "ExecStart")
	argv := strings.Fields(strings.NewReplacer("/usr/bin/cardsignd", bin, "/etc/cardsignd/cardsignd.yaml", config,
		"${STATE_DIRECTORY}", state).Replace(execStart))
	cmd := exec.Command(prefix[0], append(append(prefix[1:], "-f", "-qq", "-o", trace, "--"), argv...)...)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notify.LocalAddr().String(), "STATE_DIRECTORY="+state)
	d := testsupport.StartDaemon(t, cmd, 60*time.Second)
	grpcAddr, httpAddr := d.GRPC, d.HTTP
	// The daemon's PID (strace's child) from its READY=1.
	msg := readNotify(t, notify)
	m := regexp.MustCompile(`(?m)^MAINPID=(\d+)$`).FindStringSubmatch(msg)
	if !strings.Contains(msg, "READY=1") || m == nil {
		t.Fatalf("notification %q: want READY=1 and MAINPID=", msg)
	}
	pid, _ := strconv.Atoi(m[1])

	r := testbin.MustRun(t, cliBin, work, "sign", "--server", grpcAddr, filepath.Join(repoRoot, "testdata", "cards", "security.json"))
	if !strings.Contains(r.Stdout, "signatures") {
		t.Fatalf("cardsign sign printed no signed card:\n%s", r.Stdout)
	}
	for _, path := range []string{"/.well-known/jwks.json", "/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
	}
	syscall.Kill(pid, syscall.SIGHUP)
	if msg := readNotify(t, notify); !strings.Contains(msg, "RELOADING=1") {
		t.Fatalf("after SIGHUP: %q, want RELOADING=1", msg)
	}
	if msg := readNotify(t, notify); !strings.Contains(msg, "READY=1") {
		t.Fatalf("after the reload: %q, want READY=1", msg)
	}
	syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-d.Exited():
		if err := d.Err(); err != nil {
			t.Fatalf("cardsignd under strace: %v after SIGTERM\n%s", err, d.Log.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("cardsignd under strace did not stop within 60s of SIGTERM\n%s", d.Log.String())
	}

	tr := parseTrace(t, trace)
	if len(tr.calls) < 20 || !slices.Contains(tr.calls, "accept4") {
		t.Fatalf("the trace holds too little to check (%d calls: %v)", len(tr.calls), tr.calls)
	}
	t.Logf("%d distinct system calls: %s", len(tr.calls), strings.Join(tr.calls, " "))
	t.Logf("socket families: %s", strings.Join(tr.families, " "))

	sets := filterSets(t)
	if denied := deniedCalls(t, unit.values("Service", "SystemCallFilter"), tr.calls, sets); len(denied) > 0 {
		t.Errorf("SystemCallFilter= refuses system calls cardsignd makes: %s", strings.Join(denied, " "))
	}
	families, _ := unit.last("Service", "RestrictAddressFamilies")
	for _, f := range tr.families {
		if !slices.Contains(strings.Fields(families), f) {
			t.Errorf("RestrictAddressFamilies=%s refuses %s, which cardsignd opens", families, f)
		}
	}
	if len(tr.wx) > 0 {
		t.Errorf("MemoryDenyWriteExecute= refuses what cardsignd does:\n%s", strings.Join(tr.wx, "\n"))
	}
	if len(tr.namespaces) > 0 {
		t.Errorf("RestrictNamespaces= refuses what cardsignd does:\n%s", strings.Join(tr.namespaces, "\n"))
	}
	// The checks can fail: a call each refuses, written as strace does;
	// the filter without @network-io (sockets), or the other way round.
	for re, line := range map[*regexp.Regexp]string{
		traceWX: "7 mprotect(0x7f6261fb2000, 4096, PROT_READ|PROT_EXEC) = 0",
		traceNS: "7 clone3({flags=CLONE_VM|CLONE_NEWUSER, exit_signal=SIGCHLD}, 88) = 8",
	} {
		if !re.MatchString(line) {
			t.Errorf("%q goes unnoticed", line)
		}
	}
	for _, lines := range [][]string{
		{"@system-service", "~@privileged @resources @network-io"},
		{"~@system-service"},
	} {
		if denied := deniedCalls(t, lines, tr.calls, sets); len(denied) == 0 {
			t.Errorf("SystemCallFilter= %q passes cardsignd's calls: the check cannot fail", lines)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

func readNotify(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}
