package daemonconfig

import (
	"crypto/tls"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/internal/testsupport"
)

func TestApplyOverrides(t *testing.T) {
	c := Defaults()
	c.Apply(Overrides{})
	if c.DataDir != "./cardsignd-data" || c.Keys.Prepublish != time.Hour {
		t.Fatalf("empty overrides changed the config: %+v", c)
	}
	zero := time.Duration(0)
	c.Apply(Overrides{DataDir: "/d", GRPCAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", LogLevel: "debug", Prepublish: &zero})
	if c.DataDir != "/d" || c.GRPCAddr != "127.0.0.1:1" || c.HTTPAddr != "127.0.0.1:2" || c.LogLevel != "debug" || c.Keys.Prepublish != 0 {
		t.Fatalf("overrides not applied: %+v", c)
	}
}

// Flags are validated like the file: a public address from the command
// line is refused, without a file location.
func TestOverridesAreValidated(t *testing.T) {
	c := Defaults()
	c.Apply(Overrides{GRPCAddr: "0.0.0.0:7700"})
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "\n  grpc_addr: 0.0.0.0:7700 is not a loopback address") {
		t.Fatalf("got %v", err)
	}
}

func TestClientCertModes(t *testing.T) {
	for _, tc := range []struct {
		c              TLSConfig
		grpcWant, http tls.ClientAuthType
	}{
		{TLSConfig{CertFile: "c", KeyFile: "k"}, tls.NoClientCert, tls.NoClientCert},
		{TLSConfig{CertFile: "c", KeyFile: "k", ClientCAFile: "ca"}, tls.RequireAndVerifyClientCert, tls.VerifyClientCertIfGiven},
		{TLSConfig{CertFile: "c", KeyFile: "k", ClientCAFile: "ca", ClientAuth: "require"}, tls.RequireAndVerifyClientCert, tls.VerifyClientCertIfGiven},
		{TLSConfig{CertFile: "c", KeyFile: "k", ClientCAFile: "ca", ClientAuth: "optional"}, tls.VerifyClientCertIfGiven, tls.VerifyClientCertIfGiven},
	} {
		g, h := tc.c.ClientCertModes()
		if g != tc.grpcWant || h != tc.http {
			t.Errorf("%+v: gRPC %v HTTP %v, want %v and %v", tc.c, g, h, tc.grpcWant, tc.http)
		}
	}
}

func TestCheckBound(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv6loopback, Port: 7700}
	public := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 7700}
	for _, tc := range []struct {
		addr           net.Addr
		tlsOn, authOn  bool
		wantRefusedMsg bool
	}{
		{loop, false, false, false},
		{public, true, true, false},
		{public, true, false, true},
		{public, false, true, true},
		{&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}, false, false, true},
	} {
		err := CheckBound(tc.addr, tc.tlsOn, tc.authOn)
		if (err != nil) != tc.wantRefusedMsg {
			t.Errorf("%v tls=%v auth=%v: %v", tc.addr, tc.tlsOn, tc.authOn, err)
		}
	}
	want := "192.0.2.1:7700 is not a loopback address: listening beyond this machine requires TLS (tls.cert_file, tls.key_file) and authentication (auth.tokens or auth.clients)"
	if err := CheckBound(public, false, false); err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestAuthenticator(t *testing.T) {
	c := AuthConfig{
		Tokens:  []TokenConfig{{Name: "ci", SHA256: strings.Repeat("ab", 32), Roles: []string{"signer", "admin"}}},
		Clients: []ClientConfig{{Identity: "spiffe://example.org/*", Roles: []string{"auditor"}}},
	}
	a, err := c.Authenticator(t.Context(), nil)
	if err != nil || !a.Enabled() {
		t.Fatalf("authenticator %v, %v", a, err)
	}
	if _, err := (AuthConfig{Tokens: []TokenConfig{{Name: "bad", SHA256: "nothex"}}}).Authenticator(t.Context(), nil); err == nil || !strings.HasPrefix(err.Error(), "auth.tokens bad: ") {
		t.Errorf("bad hash: %v", err)
	}
	if a, _ := (AuthConfig{}).Authenticator(t.Context(), nil); a.Enabled() {
		t.Error("no tokens and no clients must mean authentication off")
	}
	if got := roles([]string{"signer", "root", "auditor"}); len(got) != 2 || got[0] != access.RoleSigner || got[1] != access.RoleAuditor {
		t.Errorf("roles: %v", got)
	}
}

func TestPKCS11PINAndModules(t *testing.T) {
	t.Setenv(PINEnv, "from-env")
	if pin, err := (PKCS11Config{}).PIN(); err != nil || pin != "from-env" {
		t.Errorf("no pin_file: %q, %v", pin, err)
	}
	f := testsupport.WriteFileMode(t, filepath.Join(t.TempDir(), "pin"), "1234\r\n", 0o600)
	if pin, err := (PKCS11Config{PINFile: f}).PIN(); err != nil || pin != "1234" {
		t.Errorf("pin_file wins and loses its line end: %q, %v", pin, err)
	}
	if _, err := (PKCS11Config{PINFile: f + ".missing"}).PIN(); err == nil || !strings.HasPrefix(err.Error(), "pkcs11.pin_file: ") {
		t.Errorf("missing pin_file: %v", err)
	}
	if got := (PKCS11Config{Module: "/m.so"}).Modules(); !slices.Equal(got, []string{"/m.so"}) {
		t.Errorf("module alone: %v", got)
	}
	if got := (PKCS11Config{Module: "/m.so", AllowedModules: []string{"/a.so", "/m.so"}}).Modules(); !slices.Equal(got, []string{"/a.so", "/m.so"}) {
		t.Errorf("allowed_modules: %v", got)
	}
	if got := (PKCS11Config{}).Modules(); len(got) != 0 {
		t.Errorf("none: %v", got)
	}
}
