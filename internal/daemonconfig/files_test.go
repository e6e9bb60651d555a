package daemonconfig

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cardsign/cardsign/internal/testpki"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// The config file and every file it names are read only when they are
// regular files under a size cap: /dev/zero would be read until memory runs
// out, a FIFO would wait for a writer forever, a 200 MB file would cost
// gigabytes to decode. Each is refused at once, at its field. Without the
// bound, the FIFO cases never return (the test binary's -timeout ends them).
func TestCheckReadsOnlySmallRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Sparse: 200 MB long, no disk used.
	huge := testsupport.WriteFileMode(t, filepath.Join(dir, "huge"), "", 0o600)
	if err := os.Truncate(huge, 200<<20); err != nil {
		t.Fatal(err)
	}
	ca := testpki.NewCA(t, "files")
	certPEM, keyPEM := ca.Issue(t, testpki.ServerLeaf())
	cert, key := testpki.WriteFiles(t, dir, "server", certPEM, keyPEM)
	caFile := testsupport.WriteFileMode(t, filepath.Join(dir, "ca.pem"), string(ca.CertPEM), 0o644)
	tlsYAML := func(certFile, keyFile, caFile string) string {
		return "tls:\n  cert_file: " + certFile + "\n  key_file: " + keyFile + "\n  client_ca_file: " + caFile + "\n"
	}
	pgYAML := "store:\n  url: postgres://cardsign@db.example.com/cardsign\n  password_file: "
	pinYAML := "pkcs11:\n  module: /usr/lib/softhsm/libsofthsm2.so\n  token: t\n  pin_file: "
	oidcYAML := "auth:\n  oidc:\n    issuers:\n      - {issuer: https://issuer.example.com, audience: cardsign, ca_file: FILE}\n" +
		"    rules:\n      - {issuer: https://issuer.example.com, claims: {sub: x}, roles: [signer]}\n"
	for _, tc := range []struct {
		name string
		// config is the config file's path, or else yaml its content.
		config, yaml string
		want         string
	}{
		{"config /dev/zero", "/dev/zero", "", "config: /dev/zero is not a regular file (it is a character device); give the path of a YAML file of at most 1048576 bytes"},
		{"config FIFO", fifo, "", "config: " + fifo + " is not a regular file (it is a FIFO)"},
		{"config 200 MB", huge, "", "config: " + huge + " is over the 1048576-byte limit"},
		{"config a directory", dir, "", "config: " + dir + " is not a regular file (it is a directory)"},
		{"tls.cert_file FIFO", "", tlsYAML(fifo, key, caFile), "tls: tlsreload: cert file " + fifo + ": not a regular file (it is a FIFO)"},
		{"tls.key_file /dev/zero", "", tlsYAML(cert, "/dev/zero", caFile), "tls: tlsreload: key file /dev/zero: not a regular file (it is a character device)"},
		{"tls.client_ca_file 200 MB", "", tlsYAML(cert, key, huge), "tls: tlsreload: client CA file " + huge + ": larger than 8388608 bytes"},
		{"store.password_file FIFO", "", pgYAML + fifo + "\n", "store.password_file: " + fifo + " is not a regular file (it is a FIFO)"},
		{"store.password_file 200 MB", "", pgYAML + huge + "\n", "store.password_file: " + huge + " is 209715200 bytes long"},
		{"pkcs11.pin_file FIFO", "", pinYAML + fifo + "\n", "pkcs11.pin_file: " + fifo + " is not a regular file (it is a FIFO)"},
		{"pkcs11.pin_file /dev/zero", "", pinYAML + "/dev/zero\n", "pkcs11.pin_file: /dev/zero is not a regular file"},
		{"pkcs11.pin_file 200 MB", "", pinYAML + huge + "\n", "pkcs11.pin_file: " + huge + " is over the 1024-byte limit"},
		{"auth.oidc ca_file FIFO", "", strings.Replace(oidcYAML, "FILE", fifo, 1), "auth.oidc.issuers[0].ca_file: " + fifo + " is not a regular file (it is a FIFO)"},
		{"auth.oidc ca_file 200 MB", "", strings.Replace(oidcYAML, "FILE", huge, 1), "auth.oidc.issuers[0].ca_file: " + huge + " is over the 1048576-byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.config
			if path == "" {
				path = testsupport.WriteFileMode(t, filepath.Join(t.TempDir(), "c.yaml"), tc.yaml, 0o600)
			}
			err := Check(path, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check(%s):\n%v\nwant a problem saying %q", tc.name, err, tc.want)
			}
		})
	}
}
