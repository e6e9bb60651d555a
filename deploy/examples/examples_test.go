// Package examples holds no code: its tests check the example configurations
// in this directory with the real cardsignd. Each example is copied into a
// temporary directory with its paths (/etc/cardsignd, /run/secrets,
// /var/lib/cardsignd) moved there, and what it names is made: TLS
// certificates and keys (internal/testpki), PIN and password files, a
// PostgreSQL database with TLS (internal/pgtest), a SoftHSM2 token, cloud KMS
// fakes. Then `cardsignd --check-config` must pass without a warning, a
// broken copy must fail with a located error, and cardsignd must start on
// each and become ready.
package examples

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/jackc/pgx/v5"

	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/backends/azurekv/azurekvfake"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/backends/hashivault/vaultfake"
	"github.com/cardsign/cardsign/internal/daemonconfig"
	"github.com/cardsign/cardsign/internal/pgtest"
	"github.com/cardsign/cardsign/internal/swtpmtest"
	"github.com/cardsign/cardsign/internal/testbin"
	"github.com/cardsign/cardsign/internal/testpki"
	"github.com/cardsign/cardsign/internal/testsupport"
)

var daemonBin string

func TestMain(m *testing.M) {
	testbin.Main(m, map[string]*string{"../../cmd/cardsignd": &daemonBin})
}

// examples are the files this directory must hold; every *.yaml here is
// checked, these must be among them.
var examples = []string{"file-lab.yaml", "pkcs11-hsm.yaml", "gcp-kms.yaml", "aws-kms.yaml", "tls-tokens.yaml", "postgres-replicas.yaml",
	"azure-key-vault.yaml", "hashicorp-vault.yaml", "tpm.yaml"}

// movedPrefixes are the absolute paths the examples may name; the tests move
// them into a temporary directory. The container image and the systemd unit
// use the same layout.
var movedPrefixes = []string{"/etc/cardsignd", "/run/secrets", "/var/lib/cardsignd"}

// softHSMPath is the module path the PKCS#11 example names (Debian's), and
// tpmModulePath the TPM example's (Debian's libtpm2-pkcs11-1).
const (
	softHSMPath   = "/usr/lib/softhsm/libsofthsm2.so"
	tpmModulePath = "/usr/lib/x86_64-linux-gnu/pkcs11/libtpm2_pkcs11.so"
)

func exampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range examples {
		if !slices.Contains(files, e) {
			t.Errorf("example %s is missing", e)
		}
	}
	return files
}

// setup is an example made ready to run: its copy, what it names, and the
// environment cardsignd needs for it.
type setup struct {
	name    string
	root    string // stands for /
	config  string // the copy
	text    string // the copy's text
	cfg     daemonconfig.Config
	env     []string
	caPool  *x509.CertPool // verifies the server certificate made for it
	pin     string
	created []string // files made for the example (the negative test removes each)
}

// prepare copies example name into a temporary directory and makes what it
// names. forStart also makes what only a start needs (a SoftHSM2 token, KMS
// fakes).
func prepare(t *testing.T, name string, forStart bool) *setup {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	s := &setup{name: name, root: t.TempDir(), env: os.Environ()}
	text := string(b)
	for _, p := range movedPrefixes {
		text = strings.ReplaceAll(text, p, s.root+p)
	}
	if strings.Contains(text, softHSMPath) {
		module, looked := testsupport.SoftHSMModule()
		if module == "" {
			t.Fatalf("%s names SoftHSM2's module; it is not installed here (looked at %s): apt-get install softhsm2 (scripts/test does), or set %s",
				name, strings.Join(looked, ", "), testsupport.SoftHSMModuleEnv)
		}
		text = strings.ReplaceAll(text, softHSMPath, module)
	}
	s.config = filepath.Join(s.root, "etc/cardsignd/cardsignd.yaml")
	s.write(t, text)
	s.cfg, err = daemonconfig.Load(s.config)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c := &s.cfg
	s.checkMoved(t)

	for _, d := range append([]string{c.DataDir, c.Keys.Dir}, append(c.Keys.ImportDirs, c.PKCS11.PINSourceDirs...)...) {
		if d != "" {
			mkdir(t, d, 0o700)
		}
	}
	if c.TLS.CertFile != "" || c.TLS.KeyFile != "" {
		ca := testpki.NewCA(t, "cardsign examples server CA")
		cert, key := ca.Issue(t, testpki.ServerLeaf())
		s.file(t, c.TLS.CertFile, cert, 0o644)
		s.file(t, c.TLS.KeyFile, key, 0o600)
		s.caPool = x509.NewCertPool()
		s.caPool.AddCert(ca.Cert)
	}
	if c.TLS.ClientCAFile != "" {
		s.file(t, c.TLS.ClientCAFile, testpki.NewCA(t, "cardsign examples clients CA").CertPEM, 0o644)
	}
	if c.PKCS11.PINFile != "" {
		s.pin = "1234-" + strings.ReplaceAll(name, ".", "-")
		s.file(t, c.PKCS11.PINFile, []byte(s.pin+"\n"), 0o400)
	}
	if v := c.HashiVault; v.Enabled() {
		if v.CAFile != "" {
			s.file(t, v.CAFile, testpki.NewCA(t, "cardsign examples Vault CA").CertPEM, 0o644)
		}
		if v.Auth.SecretIDFile != "" {
			s.file(t, v.Auth.SecretIDFile, []byte("secret-id-"+name+"\n"), 0o400)
		}
	}
	if c.Store.URL != "" {
		s.postgres(t)
	}
	if forStart {
		s.backends(t)
	}
	return s
}

func (s *setup) write(t *testing.T, text string) {
	t.Helper()
	s.text = text
	mkdir(t, filepath.Dir(s.config), 0o755)
	if err := os.WriteFile(s.config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkMoved fails when the example names a file or directory outside the
// moved prefixes: the test could not make it, and the deployments (container
// image, systemd unit) would not provide it.
func (s *setup) checkMoved(t *testing.T) {
	t.Helper()
	c := s.cfg
	paths := map[string]string{
		"data_dir": c.DataDir, "keys.dir": c.Keys.Dir, "tls.cert_file": c.TLS.CertFile, "tls.key_file": c.TLS.KeyFile,
		"tls.client_ca_file": c.TLS.ClientCAFile, "pkcs11.pin_file": c.PKCS11.PINFile, "store.password_file": c.Store.PasswordFile,
		"hashivault.ca_file": c.HashiVault.CAFile, "hashivault.auth.token_file": c.HashiVault.Auth.TokenFile,
		"hashivault.auth.secret_id_file": c.HashiVault.Auth.SecretIDFile,
	}
	for i, d := range c.Keys.ImportDirs {
		paths[fmt.Sprintf("keys.import_dirs[%d]", i)] = d
	}
	for i, d := range c.PKCS11.PINSourceDirs {
		paths[fmt.Sprintf("pkcs11.pin_source_dirs[%d]", i)] = d
	}
	if c.Store.URL != "" {
		if u, err := url.Parse(c.Store.URL); err == nil {
			for _, k := range []string{"sslrootcert", "sslcert", "sslkey"} {
				paths["store.url "+k] = u.Query().Get(k)
			}
		}
	}
	for field, p := range paths {
		if p != "" && !strings.HasPrefix(p, s.root+"/") {
			t.Errorf("%s: %s is %s, outside %v", s.name, field, p, movedPrefixes)
		}
	}
}

// file writes one file the example names, with its mode.
func (s *setup) file(t *testing.T, p string, data []byte, mode os.FileMode) {
	t.Helper()
	mkdir(t, filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	s.created = append(s.created, p)
}

func mkdir(t *testing.T, d string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(d, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
}

// line returns the 1-based line of the copy's first line starting (after
// indentation) with prefix.
func (s *setup) line(t *testing.T, prefix string) int {
	t.Helper()
	for i, l := range strings.Split(s.text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return i + 1
		}
	}
	t.Fatalf("%s has no line starting with %q", s.name, prefix)
	return 0
}

// ---------------------------------------------------------------------------
// PostgreSQL: one cluster per test binary, with TLS on, so that the example's
// sslmode=verify-full and sslrootcert are exercised as written.

var pg struct {
	once    sync.Once
	cluster *pgtest.Cluster
	ca      []byte // PEM of the CA that issued the server's certificate
	err     error
}

func cluster(t *testing.T) *pgtest.Cluster {
	t.Helper()
	pg.once.Do(func() { pg.err = startPostgres(t) })
	if pg.err != nil {
		t.Fatal(pg.err)
	}
	return pg.cluster
}

// startPostgres starts the cluster (testbin.Main exits without closing it:
// its watchdog removes it when the test binary ends) and turns TLS on with a
// certificate for 127.0.0.1.
func startPostgres(t *testing.T) error {
	ctx := context.Background()
	c, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		return fmt.Errorf("starting the tests' PostgreSQL cluster: %w", err)
	}
	pg.cluster = c
	ca := testpki.NewCA(t, "cardsign examples PostgreSQL CA")
	cert, key := ca.Issue(t, testpki.ServerLeaf())
	pg.ca = ca.CertPEM
	// The server reads them as its own user, and wants the key private.
	fi, err := os.Stat(c.Dir())
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	certFile, keyFile := filepath.Join(c.Dir(), "server.crt"), filepath.Join(c.Dir(), "server.key")
	for _, f := range []struct {
		path string
		data []byte
	}{{certFile, cert}, {keyFile, key}} {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return err
		}
		if err := os.Chown(f.path, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	for _, sql := range []string{
		"ALTER SYSTEM SET ssl_cert_file = '" + certFile + "'",
		"ALTER SYSTEM SET ssl_key_file = '" + keyFile + "'",
		"ALTER SYSTEM SET ssl = on",
		"SELECT pg_reload_conf()",
	} {
		if err := c.SuperExec(ctx, "postgres", sql); err != nil {
			return err
		}
	}
	// The reload is asynchronous: wait until a TLS connection is accepted.
	tlsURL := strings.Replace(c.URL("postgres"), "sslmode=disable", "sslmode=require", 1)
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, tlsURL)
		if err == nil {
			return conn.Close(ctx)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("PostgreSQL did not accept TLS after its reload: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// postgres points the example's store.url at a fresh database of the test
// cluster: the host, port, user and database change; the parameters
// (sslmode=verify-full, sslrootcert) stay as written. The password goes to
// the example's password_file.
func (s *setup) postgres(t *testing.T) {
	t.Helper()
	c := cluster(t)
	dbURL, err := c.NewDatabase(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	db, _ := url.Parse(dbURL)
	old := s.cfg.Store.URL
	u, err := url.Parse(old)
	if err != nil {
		t.Fatalf("%s: store.url: %v", s.name, err)
	}
	if u.User.String() != pgtest.Role {
		t.Fatalf("%s: store.url's user is %q: the test's role is %s; keep the example's user %s (and no password in the URL)", s.name, u.User, pgtest.Role, pgtest.Role)
	}
	u.Host, u.Path = db.Host, db.Path
	if ca := u.Query().Get("sslrootcert"); ca != "" {
		s.file(t, ca, pg.ca, 0o644)
	}
	if s.cfg.Store.PasswordFile == "" {
		t.Fatalf("%s: no store.password_file: the examples keep the password out of the config", s.name)
	}
	s.file(t, s.cfg.Store.PasswordFile, []byte(c.Password()+"\n"), 0o400)
	s.write(t, strings.Replace(s.text, old, u.String(), 1))
	if s.cfg, err = daemonconfig.Load(s.config); err != nil {
		t.Fatal(err)
	}
}

// backends makes what the example's key backends need to start: a SoftHSM2
// token for pkcs11 (with the example's PIN), and for the cloud KMS backends
// an in-process fake, whose endpoint is added to the copy (the only change
// to the example's settings).
func (s *setup) backends(t *testing.T) {
	t.Helper()
	c := s.cfg
	if c.PKCS11.Module == tpmModulePath {
		s.tpm(t)
	} else if c.PKCS11.Enabled() {
		tokens := filepath.Join(s.root, "softhsm/tokens")
		mkdir(t, tokens, 0o700)
		conf := filepath.Join(s.root, "softhsm/softhsm2.conf")
		if err := os.WriteFile(conf, []byte("directories.tokendir = "+tokens+"\nobjectstore.backend = file\nlog.level = ERROR\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s.env = append(s.env, "SOFTHSM2_CONF="+conf)
		init := exec.Command("softhsm2-util", "--init-token", "--free", "--label", c.PKCS11.Token, "--pin", s.pin, "--so-pin", "so-"+s.pin)
		init.Env = s.env
		if out, err := init.CombinedOutput(); err != nil {
			t.Fatalf("softhsm2-util --init-token: %v\n%s", err, out)
		}
	}
	if c.GCPKMS.Enabled() || c.Keys.Backend == "gcpkms" {
		fake, err := gcpkmsfake.Start(gcpkmsfake.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fake.Close() })
		if _, err := fake.AddKey(c.GCPKMS.CryptoKey, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256); err != nil {
			t.Fatalf("%s: gcpkms.crypto_key %s: %v", s.name, c.GCPKMS.CryptoKey, err)
		}
		s.addSetting(t, "gcpkms:", "endpoint: "+fake.Addr(), "insecure: true")
	}
	if c.AWSKMS.Enabled() || c.Keys.Backend == "awskms" {
		// The fake serves the example's region, as KMS's regional endpoint does.
		fake, err := awskmsfake.Start(awskmsfake.Options{Region: c.AWSKMS.Region})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fake.Close() })
		// The transparency log's key, when the example keeps it in KMS:
		// an Ed25519 key behind the alias it names, as the operator makes.
		for _, uri := range c.Log.Keys {
			if alias, ok := strings.CutPrefix(uri, "awskms:///"); ok && strings.HasPrefix(alias, "alias/") {
				arn, err := fake.CreateKey("ECC_NIST_EDWARDS25519")
				if err == nil {
					err = fake.CreateAlias(alias, arn)
				}
				if err != nil {
					t.Fatalf("%s: log key %s: %v", s.name, uri, err)
				}
			}
		}
		s.addSetting(t, "awskms:", "endpoint: "+fake.URL())
		s.env = append(s.env, "AWS_ACCESS_KEY_ID=AKIDCARDSIGNEXAMPLE", "AWS_SECRET_ACCESS_KEY=cardsign-example-secret",
			"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	}
	if c.AzureKV.Enabled() {
		s.azure(t)
	}
	if c.HashiVault.Enabled() {
		s.vault(t)
	}
}

// tpm starts a software TPM with a token for the TPM example, and points
// the copy at it: the module and token the harness made, its PIN in the
// example's PIN file, and the module's environment (docs: the unit's
// Environment= lines).
func (s *setup) tpm(t *testing.T) {
	t.Helper()
	tpm := swtpmtest.Start(t)
	text := strings.Replace(s.text, tpmModulePath, tpm.Module, 1)
	text = strings.Replace(text, "\n  token: "+s.cfg.PKCS11.Token+"\n", "\n  token: "+tpm.Token+"\n", 1)
	s.write(t, text)
	s.pin = tpm.PIN
	if err := os.WriteFile(s.cfg.PKCS11.PINFile, []byte(tpm.PIN+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	s.env = tpm.Environ()
}

// azure starts a Key Vault fake for the Azure example and points the copy
// at it: the fake's host instead of the vault's (allowed), and the
// managed-identity environment an App Service or VM gives; its CA in
// SSL_CERT_FILE, as a private endpoint's would be in the system roots.
func (s *setup) azure(t *testing.T) {
	t.Helper()
	fake, err := azurekvfake.Start(azurekvfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	u, err := url.Parse(strings.Replace(s.cfg.AzureKV.Key, "azurekv://", "https://", 1))
	if err != nil {
		t.Fatal(err)
	}
	s.write(t, strings.ReplaceAll(s.text, u.Host, fake.Host()))
	s.addSetting(t, "azurekv:", fmt.Sprintf("allowed_hosts: [%q]", fake.Host()))
	ca := filepath.Join(s.root, "azure-ca.pem")
	s.file(t, ca, fake.CACertPEM(), 0o644)
	s.env = append(s.env, "IDENTITY_ENDPOINT="+fake.IdentityEndpoint(), "IDENTITY_HEADER="+fake.IdentityHeader(),
		"IDENTITY_SERVER_THUMBPRINT=", "SSL_CERT_FILE="+ca)
}

// vaultPolicy is the policy the Vault example's comments write:
// `path "P" { capabilities = [...] }` lines.
var vaultPolicy = regexp.MustCompile(`#\s+path "([^"]+)"\s+\{ capabilities = \[([^\]]*)\] \}`)

// vault starts a Vault fake for the Vault example with exactly what its
// comments make: the policy, the AppRole (the example's role ID, the
// secret ID file's secret), the log's Ed25519 Transit key. The copy's
// address becomes the fake's.
func (s *setup) vault(t *testing.T) {
	t.Helper()
	fake, err := vaultfake.Start(vaultfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	paths := map[string][]string{}
	for _, m := range vaultPolicy.FindAllStringSubmatch(s.text, -1) {
		for _, c := range strings.Split(m[2], ",") {
			paths[m[1]] = append(paths[m[1]], strings.Trim(strings.TrimSpace(c), `"`))
		}
	}
	if len(paths) == 0 {
		t.Fatalf("%s: no policy in its comments", s.name)
	}
	if err := fake.AddPolicy("cardsignd", paths); err != nil {
		t.Fatal(err)
	}
	secret, err := os.ReadFile(s.cfg.HashiVault.Auth.SecretIDFile)
	if err != nil {
		t.Fatal(err)
	}
	fake.AddAppRole(s.cfg.HashiVault.Auth.RoleID, strings.TrimSpace(string(secret)), 20*time.Minute, "cardsignd")
	for _, uri := range s.cfg.Log.Keys {
		if name, ok := strings.CutPrefix(uri, "hashivault://"); ok {
			if err := fake.CreateKey(strings.Split(name, "/")[0], "ed25519"); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.write(t, strings.Replace(s.text, s.cfg.HashiVault.Address, fake.URL(), 1))
}

// addSetting adds lines at the top of a top-level section of the copy.
func (s *setup) addSetting(t *testing.T, section string, lines ...string) {
	t.Helper()
	i := strings.Index(s.text, "\n"+section+"\n")
	if i < 0 {
		t.Fatalf("%s: no top-level %s section", s.name, section)
	}
	i += len(section) + 2
	s.write(t, s.text[:i]+"  "+strings.Join(lines, "\n  ")+"\n"+s.text[i:])
}

// ---------------------------------------------------------------------------

func checkConfig(t *testing.T, s *setup) testbin.Result {
	t.Helper()
	cmd := exec.Command(daemonBin, "--check-config", s.config)
	cmd.Env = s.env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return testbin.Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// TestExamplesCheckConfig: each example, with what it names, passes
// --check-config, and says nothing but its build and "ok" (and, with
// PostgreSQL, what it found there).
func TestExamplesCheckConfig(t *testing.T) {
	for _, name := range exampleFiles(t) {
		t.Run(name, func(t *testing.T) {
			s := prepare(t, name, false)
			r := checkConfig(t, s)
			lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
			if r.Code != 0 || lines[len(lines)-1] != s.config+": ok" {
				t.Fatalf("cardsignd --check-config %s: exit %d\n%s", name, r.Code, r.Stderr)
			}
			for i, l := range lines[:len(lines)-1] {
				switch {
				case i == 0 && regexp.MustCompile(`^cardsignd \S+ \(.+\)$`).MatchString(l):
					// The build that checked, always first.
				case s.cfg.Store.URL != "" && strings.HasPrefix(l, "store.url: connected to ") && strings.Contains(l, "sslmode=verify-full") &&
					strings.Contains(l, "; schema empty"):
					// What --check-config reports about the database: it
					// connected with the example's TLS settings and found
					// the fresh database empty.
				default:
					t.Errorf("cardsignd --check-config %s said more than ok: %q", name, l)
				}
			}
			t.Logf("%s", strings.TrimSpace(r.Stderr))
		})
	}
}

// located is one problem of --check-config's report: FILE:LINE[:COL]: what.
var located = regexp.MustCompile(`(?m)^  (\S+?):(\d+)(?::\d+)?: (.*)$`)

// TestExamplesBroken: a copy with a misspelt field, and copies missing each
// file the example names, fail --check-config with the problem located in
// the file. This is what keeps TestExamplesCheckConfig from passing on a
// check that checks nothing.
func TestExamplesBroken(t *testing.T) {
	for _, name := range exampleFiles(t) {
		t.Run(name, func(t *testing.T) {
			s := prepare(t, name, false)
			good := s.text
			at := s.line(t, "keys:")
			broken := strings.Replace(good, "\nkeys:\n", "\nkeys:\n  backnd: file\n", 1)
			s.write(t, broken)
			expectLocated(t, s, at+1, `unknown field "backnd"`)
			s.write(t, good)

			// Every file --check-config reads.
			fields := map[string]string{
				s.cfg.TLS.CertFile: "cert_file:", s.cfg.TLS.KeyFile: "key_file:", s.cfg.TLS.ClientCAFile: "client_ca_file:",
				s.cfg.Store.PasswordFile: "password_file:", s.cfg.PKCS11.PINFile: "pin_file:",
				s.cfg.HashiVault.Auth.SecretIDFile: "secret_id_file:",
			}
			want, removed := 0, 0
			for f := range fields {
				if f != "" {
					want++
				}
			}
			for _, f := range s.created {
				prefix, ok := fields[f]
				if !ok {
					continue
				}
				removed++
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
				expectLocated(t, s, s.line(t, prefix), "no such file or directory")
				if err := os.WriteFile(f, data, 0o400); err != nil {
					t.Fatal(err)
				}
			}
			if removed != want {
				t.Errorf("%d of the %d files %s names were tried missing", removed, want, name)
			}
		})
	}
	t.Run("postgres-replicas.yaml/wrong password", func(t *testing.T) {
		s := prepare(t, "postgres-replicas.yaml", false)
		s.file(t, s.cfg.Store.PasswordFile, []byte("not-the-password\n"), 0o400)
		expectLocated(t, s, s.line(t, "url:"), "cannot connect to")
	})
	t.Run("postgres-replicas.yaml/readable password file", func(t *testing.T) {
		s := prepare(t, "postgres-replicas.yaml", false)
		if err := os.Chmod(s.cfg.Store.PasswordFile, 0o644); err != nil {
			t.Fatal(err)
		}
		expectLocated(t, s, s.line(t, "password_file:"), "chmod 600")
	})
}

// expectLocated runs --check-config on the copy and wants exit 1 with a
// problem at line that contains what.
func expectLocated(t *testing.T, s *setup, line int, what string) {
	t.Helper()
	r := checkConfig(t, s)
	if r.Code != 1 {
		t.Errorf("%s broken: exit %d, want 1\n%s", s.name, r.Code, r.Stderr)
		return
	}
	for _, m := range located.FindAllStringSubmatch(r.Stderr, -1) {
		if m[1] == s.config && m[2] == fmt.Sprint(line) && strings.Contains(m[3], what) {
			return
		}
	}
	t.Errorf("%s broken: no problem at %s:%d mentioning %q:\n%s", s.name, s.config, line, what, r.Stderr)
}

// TestExamplesStart starts cardsignd on each example, on free loopback ports,
// with its key backend at hand (SoftHSM2, the KMS fakes, the test database):
// it must make its first key, report ready on /readyz, log no warning or error
// but the ones explained below, and stop cleanly on SIGTERM. This covers what
// --check-config leaves out: the PKCS#11 module, token and PIN file, and the
// KMS settings.
func TestExamplesStart(t *testing.T) {
	for _, name := range exampleFiles(t) {
		t.Run(name, func(t *testing.T) {
			s := prepare(t, name, true)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, daemonBin, "--config", s.config, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
			cmd.Env = s.env
			cmd.WaitDelay = 5 * time.Second
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := make(chan logLine, 1000)
			go readLog(stderr, lines)
			var log []string
			var httpAddr string
			for httpAddr == "" {
				select {
				case l, ok := <-lines:
					if !ok {
						cmd.Wait()
						t.Fatalf("cardsignd exited before it was ready:\n%s", strings.Join(log, "\n"))
					}
					log = append(log, l.text)
					if l.msg == "cardsignd ready" {
						httpAddr = l.http
					}
				case <-ctx.Done():
					t.Fatalf("cardsignd was not ready within the timeout:\n%s", strings.Join(log, "\n"))
				}
			}
			// The readiness check runs at start; give it a few seconds.
			for i := 0; ; i++ {
				code, body := readyz(t, s, httpAddr)
				if code == http.StatusOK {
					break
				}
				if i == 50 {
					t.Errorf("/readyz: %d %s", code, body)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			for l := range lines {
				log = append(log, l.text)
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("cardsignd after SIGTERM: %v", err)
			}
			for _, l := range log {
				if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") ||
					strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
					if name == "file-lab.yaml" && (strings.Contains(l, "no authentication configured") || strings.Contains(l, "TLS is off")) {
						continue // the lab example has neither, and is told so: those warnings are the point
					}
					t.Errorf("%s: unexpected: %s", name, l)
				}
			}
			if t.Failed() {
				t.Logf("log:\n%s", strings.Join(log, "\n"))
			}
		})
	}
}

// logLine is one line of cardsignd's log, in text or JSON format.
type logLine struct {
	text, msg, http string
}

var textMsg = regexp.MustCompile(`msg="([^"]*)"`)
var textHTTP = regexp.MustCompile(` http=(\S+)`)

func readLog(r io.Reader, out chan<- logLine) {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := logLine{text: sc.Text()}
		var j struct{ Msg, HTTP string }
		if json.Unmarshal(sc.Bytes(), &j) == nil {
			l.msg, l.http = j.Msg, j.HTTP
		} else {
			if m := textMsg.FindStringSubmatch(l.text); m != nil {
				l.msg = m[1]
			}
			if m := textHTTP.FindStringSubmatch(l.text); m != nil {
				l.http = m[1]
			}
		}
		out <- l
	}
}

// readyz asks the daemon's HTTP listener for /readyz, over TLS when the
// example has it (verified against the CA that made its certificate).
func readyz(t *testing.T, s *setup, addr string) (int, string) {
	t.Helper()
	scheme, client := "http", &http.Client{Timeout: 10 * time.Second}
	if s.caPool != nil {
		scheme = "https"
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.caPool}}
	}
	resp, err := client.Get(scheme + "://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}
