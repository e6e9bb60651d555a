package main

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/miekg/pkcs11"
)

// softHSM makes a throw-away SoftHSM2 token directory with one token and
// returns the module path and the environment that points SoftHSM at it.
func softHSM(t *testing.T, label, pin string) (module string, env []string) {
	t.Helper()
	module, looked := testsupport.SoftHSMModule()
	if module == "" {
		t.Fatalf("SoftHSM2 is not installed (module looked for at %s): run scripts/test, which installs softhsm2, or set %s",
			strings.Join(looked, ", "), testsupport.SoftHSMModuleEnv)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "softhsm2.conf")
	tokens := filepath.Join(dir, "tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("directories.tokendir = "+tokens+"\nobjectstore.backend = file\nlog.level = ERROR\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env = append(os.Environ(), "SOFTHSM2_CONF="+conf)
	init := exec.Command("softhsm2-util", "--init-token", "--free", "--label", label, "--pin", pin, "--so-pin", "so-"+pin)
	init.Env = env
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("softhsm2-util --init-token: %v\n%s", err, out)
	}
	return module, env
}

func TestDaemonPKCS11(t *testing.T) {
	const label, pin = "cardsign", "4321"
	module, env := softHSM(t, label, pin)
	work := t.TempDir()
	cfgFile := filepath.Join(work, "cardsignd.yaml")
	writeFile(t, cfgFile, "keys:\n  backend: pkcs11\n  prepublish: 0s\npkcs11:\n  module: "+module+"\n  token: "+label+"\n")
	env = append(env, pinEnv+"="+pin)
	d := startDaemonEnv(t, env, filepath.Join(work, "data"), "--config", cfgFile)

	// The first key was generated inside the token.
	list := mustCLI(t, work, "keys", "list", "--server", d.grpc).Stdout
	if !strings.Contains(list, "pkcs11:") || !strings.Contains(list, "active") {
		t.Fatalf("the embedded first key must live in the token:\n%s", list)
	}
	if strings.Contains(list, pin) || strings.Contains(d.log.String(), pin) {
		t.Fatal("the PIN appears in a key listing or the log")
	}
	var signed []string
	var lastURI string
	for _, alg := range []string{"ES256", "ES384", "ES512", "RS256", "PS256", "EdDSA"} {
		rot := mustCLI(t, work, "keys", "rotate", "--alg", alg, "--prepublish", "0s", "--server", d.grpc).Stdout
		fields := strings.Fields(strings.Split(rot, "\n")[1])
		kid, uri := fields[0], fields[len(fields)-1]
		out := filepath.Join(work, "card-"+alg+".json")
		writeFile(t, out, mustCLI(t, work, "sign", "--server", d.grpc, cardFile("security.json")).Stdout)
		if k := sigKIDs(t, testsupport.ReadFile(t, out)); len(k) != 1 || k[0] != kid {
			t.Fatalf("%s: card signed by %v, want the new token key %s", alg, k, kid)
		}
		mustCLI(t, work, "verify", "--jwks", d.jwksURL(), out)
		signed = append(signed, out)
		checkNotExtractable(t, module, env, pin, label, uri)
		lastURI = uri
	}
	_, body := httpGet(t, d.jwksURL())
	writeFile(t, filepath.Join(work, "jwks.json"), string(body))
	verifyJS(t, filepath.Join(work, "jwks.json"), signed...)

	// A module outside pkcs11.allowed_modules is refused, naming the module
	// asked for and the setting that would allow it.
	const other = "/usr/lib/cardsign-test/other-p11.so"
	r := cli(t, work, nil, "keys", "import", "--server", d.grpc, "pkcs11:token="+label+";object=k?module-path="+other)
	if r.Code == 0 || !strings.Contains(r.Stderr, other) || !strings.Contains(r.Stderr, "pkcs11.allowed_modules") {
		t.Fatalf("import with a module that is not allowed: exit %d\n%s", r.Code, r.Stderr)
	}
	d.stop()

	// Offline, the CLI reads the PIN from a pin-source file anywhere (the
	// daemon restricts pin-source to pkcs11.pin_source_dirs; the CLI runs
	// with its user's own rights).
	pinFile := filepath.Join(work, "pin.txt")
	if err := os.WriteFile(pinFile, []byte(pin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(lastURI, "?") {
		sep = "&"
	}
	cmd := exec.Command(cliBin, "sign", "--key", lastURI+sep+"pin-source="+pinFile, cardFile("security.json"))
	cmd.Dir = work
	for _, kv := range env {
		if !strings.HasPrefix(kv, pinEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "CARDSIGN_PKCS11_MODULE="+module)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cardsign sign --key %s with a pin-source file: %v\n%s", lastURI, err, out)
	}
}

// checkNotExtractable reads the private key object named by a pkcs11: URI
// through PKCS#11 in this process and requires CKA_SENSITIVE and not
// CKA_EXTRACTABLE: the key can sign but never leave the token.
func checkNotExtractable(t *testing.T, module string, env []string, pin, label, uri string) {
	t.Helper()
	id := pkcs11ID(t, uri)
	for _, kv := range env {
		if strings.HasPrefix(kv, "SOFTHSM2_CONF=") {
			t.Setenv("SOFTHSM2_CONF", strings.TrimPrefix(kv, "SOFTHSM2_CONF="))
		}
	}
	p := pkcs11.New(module)
	if p == nil {
		t.Fatalf("cannot load %s", module)
	}
	if err := p.Initialize(); err != nil {
		t.Fatal(err)
	}
	defer func() { p.Finalize(); p.Destroy() }()
	slots, err := p.GetSlotList(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, slot := range slots {
		info, err := p.GetTokenInfo(slot)
		if err != nil || strings.TrimRight(info.Label, " \x00") != label {
			continue
		}
		s, err := p.OpenSession(slot, pkcs11.CKF_SERIAL_SESSION)
		if err != nil {
			t.Fatal(err)
		}
		defer p.CloseSession(s)
		if err := p.Login(s, pkcs11.CKU_USER, pin); err != nil {
			t.Fatal(err)
		}
		if err := p.FindObjectsInit(s, []*pkcs11.Attribute{
			pkcs11.NewAttribute(pkcs11.CKA_CLASS, pkcs11.CKO_PRIVATE_KEY),
			pkcs11.NewAttribute(pkcs11.CKA_ID, id),
		}); err != nil {
			t.Fatal(err)
		}
		objs, _, err := p.FindObjects(s, 2)
		p.FindObjectsFinal(s)
		if err != nil || len(objs) != 1 {
			t.Fatalf("private key with CKA_ID %x: %d objects, %v", id, len(objs), err)
		}
		attrs, err := p.GetAttributeValue(s, objs[0], []*pkcs11.Attribute{
			pkcs11.NewAttribute(pkcs11.CKA_EXTRACTABLE, nil),
			pkcs11.NewAttribute(pkcs11.CKA_SENSITIVE, nil),
			pkcs11.NewAttribute(pkcs11.CKA_TOKEN, nil),
		})
		if err != nil {
			t.Fatal(err)
		}
		extractable, sensitive, token := attrs[0].Value[0] != 0, attrs[1].Value[0] != 0, attrs[2].Value[0] != 0
		if extractable || !sensitive || !token {
			t.Fatalf("key %s: extractable=%v sensitive=%v token=%v", uri, extractable, sensitive, token)
		}
		return
	}
	t.Fatalf("token %q not found", label)
}

// pkcs11ID extracts the id attribute of a pkcs11: URI.
func pkcs11ID(t *testing.T, uri string) []byte {
	t.Helper()
	path := strings.TrimPrefix(uri, "pkcs11:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	for _, attr := range strings.Split(path, ";") {
		if v, ok := strings.CutPrefix(attr, "id="); ok {
			raw, err := url.PathUnescape(v)
			if err != nil {
				t.Fatal(err)
			}
			return []byte(raw)
		}
	}
	t.Fatalf("no id in %s", uri)
	return nil
}
