//go:build cgo && !nopkcs11

package pkcs11

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	p11 "github.com/miekg/pkcs11"
)

// The tests run against a real SoftHSM2 with throw-away tokens. A PKCS#11
// library is initialized once per process and reads SOFTHSM2_CONF then, so
// TestMain makes one token directory for the whole run, before anything
// loads the library, and removes it at the end.

// fixture is one test token.
type fixture struct{ label, pin string }

// soPIN is the security officer PIN of every test token.
const soPIN = "so-Secret-8841"

// env is written once by TestMain and only read by the tests.
var env struct {
	module   string
	tokenDir string
	// main: algorithms, concurrency, errors, benchmark; reset: session
	// reset; away: unreachable token; pin: wrong-PIN tests (nothing else
	// logs in to it, since a process logged in once is never asked again).
	main, reset, away, pin fixture
}

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	module, looked := testsupport.SoftHSMModule()
	env.module = module
	_, utilErr := exec.LookPath("softhsm2-util")
	if env.module == "" || utilErr != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the backends/pkcs11 tests need SoftHSM2 (module looked for at %s; softhsm2-util on PATH: %v).\n"+
			"Run scripts/test, which installs it (apt-get install softhsm2), or set %s.\n",
			strings.Join(looked, ", "), utilErr == nil, testsupport.SoftHSMModuleEnv)
		return 1
	}
	dir, err := os.MkdirTemp("", "cardsign-pkcs11-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	env.tokenDir = filepath.Join(dir, "tokens")
	conf := filepath.Join(dir, "softhsm2.conf")
	if err := os.Mkdir(env.tokenDir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	cfg := "directories.tokendir = " + env.tokenDir + "\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n"
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	os.Setenv("SOFTHSM2_CONF", conf)

	env.main = fixture{"cardsign-main", "Pin.main-7Q2x"}
	env.reset = fixture{"cardsign-reset", "Pin.reset-K8vw"}
	env.away = fixture{"cardsign-away", "Pin.away-3mRt"}
	env.pin = fixture{"cardsign-pin", "Pin.pin-Hh61"}
	for _, f := range []fixture{env.main, env.reset, env.away, env.pin} {
		if err := initToken(f); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: SoftHSM2 token setup:", err)
			return 1
		}
	}
	return m.Run()
}

// initToken creates a token with softhsm2-util.
func initToken(f fixture) error {
	out, err := exec.Command("softhsm2-util", "--init-token", "--free", "--label", f.label, "--pin", f.pin, "--so-pin", soPIN).CombinedOutput()
	if err != nil {
		return fmt.Errorf("softhsm2-util --init-token --label %s: %v\n%s", f.label, err, out)
	}
	return nil
}

// uniq makes a label unique to this run of a test: tokens live as long as
// the process, and go test -count=N runs each test N times in it.
func uniq(base string) string {
	return base + "-" + rand.Text()[:8]
}

// tokenDirOf returns the directory of the token with this serial: SoftHSM2
// names it by a UUID that ends in the serial.
func tokenDirOf(t testing.TB, serial string) string {
	t.Helper()
	entries, err := os.ReadDir(env.tokenDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(strings.ReplaceAll(e.Name(), "-", ""), serial) {
			return filepath.Join(env.tokenDir, e.Name())
		}
	}
	t.Fatalf("no directory for token serial %s in %s", serial, env.tokenDir)
	return ""
}

// allPINs are the secrets no error or log line may contain.
func allPINs() []string {
	return []string{env.main.pin, env.reset.pin, env.away.pin, env.pin.pin, soPIN, wrongPIN}
}

// wrongPIN is a PIN no token has.
const wrongPIN = "Wrong.pin-9Zk3"

// newBackend returns a Backend on the SoftHSM2 module whose logs are
// collected; at cleanup it is closed and the logs are checked for PINs.
func newBackend(t testing.TB, cfg Config) (*Backend, *testsupport.SyncBuffer) {
	t.Helper()
	logs := &testsupport.SyncBuffer{}
	if cfg.DefaultModule == "" {
		cfg.DefaultModule = env.module
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		noPIN(t, "log", logs.String())
	})
	return b, logs
}

// newES256Key creates an ES256 key named label on b's token and opens it,
// returning its URI and Handle.
func newES256Key(t testing.TB, b *Backend, label string) (string, backends.Handle) {
	t.Helper()
	uri, err := b.Create(t.Context(), backends.CreateRequest{Alg: jose.ES256, Name: label})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	h, err := b.Open(t.Context(), uri)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return uri, h
}

// noPIN fails the test when text contains any test PIN.
func noPIN(t testing.TB, what, text string) {
	t.Helper()
	for _, pin := range allPINs() {
		if strings.Contains(text, pin) {
			t.Errorf("%s contains the PIN %q:\n%s", what, pin, text)
		}
	}
}

// tokenOf returns the backend's state of the token with this label.
func tokenOf(t testing.TB, b *Backend, label string) *token {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, tok := range b.tokens {
		if tok.label == label {
			return tok
		}
	}
	t.Fatalf("backend has no token %q", label)
	return nil
}

// loginTo makes b load the module and log in to f's token with the
// configured PIN, as the first Open would.
func loginTo(t testing.TB, b *Backend, f fixture) *token {
	t.Helper()
	tok, err := b.token(&keyURI{token: map[string]string{"token": f.label}})
	if err != nil {
		t.Fatalf("log in to %s: %v", f.label, err)
	}
	return tok
}

// rawToken is a second, independent miekg/pkcs11 handle on the module, the
// way another part of the process (or a test) would hold one. It joins the
// library's initialization and never finalizes it.
type rawToken struct {
	c    *p11.Ctx
	slot uint
	s    p11.SessionHandle // read-write, logged in
}

func openRaw(t testing.TB, f fixture) *rawToken {
	t.Helper()
	c := p11.New(env.module)
	if c == nil {
		t.Fatalf("cannot load %s", env.module)
	}
	if err := c.Initialize(); err != nil && !errors.Is(err, p11.Error(p11.CKR_CRYPTOKI_ALREADY_INITIALIZED)) {
		t.Fatalf("C_Initialize: %v", err)
	}
	r := &rawToken{c: c}
	slots, err := c.GetSlotList(true)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range slots {
		if info, err := c.GetTokenInfo(s); err == nil && info.Label == f.label {
			r.slot, found = s, true
		}
	}
	if !found {
		t.Fatalf("raw handle: no token %q", f.label)
	}
	if r.s, err = c.OpenSession(r.slot, p11.CKF_SERIAL_SESSION|p11.CKF_RW_SESSION); err != nil {
		t.Fatal(err)
	}
	if err := c.Login(r.s, p11.CKU_USER, f.pin); err != nil && !errors.Is(err, p11.Error(p11.CKR_USER_ALREADY_LOGGED_IN)) {
		t.Fatalf("raw login: %v", err)
	}
	t.Cleanup(func() {
		// Only our own session: C_CloseAllSessions would log the backend out.
		_ = c.CloseSession(r.s)
		c.Destroy()
	})
	return r
}

// privateKey finds the private key with this CKA_ID.
func (r *rawToken) privateKey(t testing.TB, id []byte) p11.ObjectHandle {
	t.Helper()
	hs, err := findObjects(r.c, r.s, privateTemplate("", false, id, true), 2)
	if err != nil || len(hs) != 1 {
		t.Fatalf("raw find of private key %x: %v, %d found", id, err, len(hs))
	}
	return hs[0]
}
