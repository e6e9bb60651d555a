package tlsreload

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/internal/testpki"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// secretDir lays files out the way Kubernetes mounts a secret: each version
// in its own directory, a ..data symlink to the current one, and stable names
// linking through ..data. publish swaps ..data with one rename, so a reader
// never sees half a rotation, as with a real secret update.
type secretDir struct {
	t       *testing.T
	dir     string
	version int
}

func newSecretDir(t *testing.T, certPEM, keyPEM, caPEM []byte) *secretDir {
	t.Helper()
	s := &secretDir{t: t, dir: t.TempDir()}
	for _, name := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(s.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	s.publish(certPEM, keyPEM, caPEM)
	return s
}

func (s *secretDir) cert() string { return filepath.Join(s.dir, "tls.crt") }
func (s *secretDir) key() string  { return filepath.Join(s.dir, "tls.key") }
func (s *secretDir) ca() string   { return filepath.Join(s.dir, "ca.crt") }

// publish makes a new version current. A nil argument leaves that file out
// of the version, so its stable name dangles.
func (s *secretDir) publish(certPEM, keyPEM, caPEM []byte) {
	s.t.Helper()
	s.version++
	vdir := fmt.Sprintf("..v%d", s.version)
	if err := os.Mkdir(filepath.Join(s.dir, vdir), 0o755); err != nil {
		s.t.Fatal(err)
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{"tls.crt", certPEM, 0o644}, {"tls.key", keyPEM, 0o600}, {"ca.crt", caPEM, 0o644}} {
		if f.data == nil {
			continue
		}
		p := filepath.Join(s.dir, vdir, f.name)
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			s.t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil { // despite the umask
			s.t.Fatal(err)
		}
	}
	tmp := filepath.Join(s.dir, "..data_tmp")
	if err := os.Symlink(vdir, tmp); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		s.t.Fatal(err)
	}
}

func testLogger(w io.Writer) *slog.Logger {
	if w == nil {
		w = io.Discard
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func mustNew(t *testing.T, cfg Config) *Reloader {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(nil)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// serve runs an echo server: after the handshake it sends the client's
// Identity (or "-" for none) on a line, then echoes lines back.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					c.Close()
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
				}()
				tc := c.(*tls.Conn)
				tc.SetDeadline(time.Now().Add(10 * time.Second))
				if err := tc.Handshake(); err != nil {
					return
				}
				tc.SetDeadline(time.Time{})
				id := "-"
				if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
					id = access.CertificateIdentity(pc[0])
				}
				if _, err := io.WriteString(tc, id+"\n"); err != nil {
					return
				}
				io.Copy(tc, tc)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

type client struct {
	conn *tls.Conn
	rd   *bufio.Reader
	id   string // what the server says we are
}

// dial connects and reads the server's greeting. A refused client
// certificate shows up in the handshake (TLS 1.2) or on the first read
// (TLS 1.3, where the client finishes before the server verifies it), so
// both count as refusal.
func dial(t *testing.T, addr string, cfg *tls.Config) (*client, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(conn)
	id, err := rd.ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, err
	}
	t.Cleanup(func() { conn.Close() })
	return &client{conn: conn, rd: rd, id: strings.TrimSuffix(id, "\n")}, nil
}

func mustDial(t *testing.T, addr string, cfg *tls.Config) *client {
	t.Helper()
	c, err := dial(t, addr, cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	return c
}

func (c *client) echo(msg string) error {
	if _, err := io.WriteString(c.conn, msg+"\n"); err != nil {
		return err
	}
	got, err := c.rd.ReadString('\n')
	if err != nil {
		return err
	}
	if got != msg+"\n" {
		return fmt.Errorf("echo: got %q, want %q", got, msg)
	}
	return nil
}

func (c *client) serial() *big.Int {
	return c.conn.ConnectionState().PeerCertificates[0].SerialNumber
}

func serialOf(t *testing.T, certPEM []byte) *big.Int {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber
}

func rootsOf(cas ...*testpki.CA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.Cert)
	}
	return p
}

// clientConfig trusts serverCA and, if issuer is set, presents a client
// certificate from it for uri.
func clientConfig(t *testing.T, serverCA, issuer *testpki.CA, uri string) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: rootsOf(serverCA)}
	if issuer != nil {
		certPEM, keyPEM := issuer.Issue(t, testpki.Leaf{CommonName: "client", URIs: []string{uri}, Client: true})
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// startWatch runs Watch until the test ends and waits for it to return.
func startWatch(t *testing.T, r *Reloader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		r.Watch(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Watch did not return after cancel")
		}
	})
}

func TestRotation(t *testing.T) {
	for _, trigger := range []string{"Reload", "Watch"} {
		t.Run(trigger, func(t *testing.T) {
			root := testpki.NewCA(t, "root")
			inter := root.Intermediate(t, "inter")
			cert1, key1 := root.Issue(t, testpki.ServerLeaf())
			// The replacement comes via an intermediate, so the reloaded
			// chain must reach the client too.
			cert2, key2 := inter.Issue(t, testpki.ServerLeaf())
			sd := newSecretDir(t, cert1, key1, nil)
			r := mustNew(t, Config{CertFile: sd.cert(), KeyFile: sd.key(), Interval: 5 * time.Millisecond})
			addr := serve(t, r.ServerConfig(tls.NoClientCert, "h2", "http/1.1"))
			ccfg := &tls.Config{RootCAs: rootsOf(root), NextProtos: []string{"h2"}}

			old := mustDial(t, addr, ccfg)
			if got, want := old.serial(), serialOf(t, cert1); got.Cmp(want) != 0 {
				t.Fatalf("initial serial %x, want %x", got, want)
			}
			if p := old.conn.ConnectionState().NegotiatedProtocol; p != "h2" {
				t.Errorf("ALPN = %q, want h2", p)
			}

			sd.publish(cert2, key2, nil)
			switch trigger {
			case "Reload":
				changed, err := r.Reload()
				if err != nil || !changed {
					t.Fatalf("Reload = %v, %v; want true, nil", changed, err)
				}
			case "Watch":
				startWatch(t, r)
				testsupport.WaitFor(t, "Watch to reload", 10*time.Second, func() bool { return r.Reloads() == 1 })
			}
			if got, want := r.Leaf().SerialNumber, serialOf(t, cert2); got.Cmp(want) != 0 {
				t.Fatalf("Leaf serial %x, want %x", got, want)
			}

			nc := mustDial(t, addr, ccfg)
			if got, want := nc.serial(), serialOf(t, cert2); got.Cmp(want) != 0 {
				t.Fatalf("serial after reload %x, want %x", got, want)
			}
			if n := len(nc.conn.ConnectionState().PeerCertificates); n != 2 {
				t.Errorf("server sent %d certificates, want leaf and intermediate", n)
			}
			// The connection from before the reload must still carry data.
			if err := old.echo("still here"); err != nil {
				t.Fatalf("connection opened before the reload: %v", err)
			}

			changed, err := r.Reload()
			if err != nil || changed {
				t.Errorf("Reload of unchanged files = %v, %v; want false, nil", changed, err)
			}
			if r.Reloads() != 1 || r.Failures() != 0 {
				t.Errorf("Reloads, Failures = %d, %d; want 1, 0", r.Reloads(), r.Failures())
			}
		})
	}
}

// issueExpired issues a server leaf of ca that expired two days ago, after
// an hour of validity.
func issueExpired(t *testing.T, ca *testpki.CA) (certPEM, keyPEM []byte) {
	t.Helper()
	past := time.Now().Add(-48 * time.Hour)
	leaf := testpki.ServerLeaf()
	leaf.NotBefore, leaf.NotAfter = past, past.Add(time.Hour)
	return ca.Issue(t, leaf)
}

func TestReloadRefusesBrokenFiles(t *testing.T) {
	root := testpki.NewCA(t, "root")
	caA := testpki.NewCA(t, "client CA A")
	cert1, key1 := root.Issue(t, testpki.ServerLeaf())
	cert2, key2 := root.Issue(t, testpki.ServerLeaf())
	_, otherKey := root.Issue(t, testpki.ServerLeaf())
	expCert, expKey := issueExpired(t, root)

	tests := []struct {
		name           string
		cert, key, ca  []byte
		file           func(*secretDir) string
		wantErrContain string
	}{
		{"garbage cert", []byte("not a certificate"), key2, caA.CertPEM, (*secretDir).cert, "no PEM data"},
		{"corrupt cert", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), key2, caA.CertPEM, (*secretDir).cert, "certificate 1"},
		{"expired cert", expCert, expKey, caA.CertPEM, (*secretDir).cert, "expired"},
		{"mismatched key", cert2, otherKey, caA.CertPEM, (*secretDir).key, "does not match"},
		{"garbage key", cert2, []byte("garbage"), caA.CertPEM, (*secretDir).key, "no PEM data"},
		{"cert in key file", cert2, cert2, caA.CertPEM, (*secretDir).key, "no private key"},
		{"missing key", cert2, nil, caA.CertPEM, (*secretDir).key, "no such file"},
		{"empty CA bundle", cert2, key2, []byte{}, (*secretDir).ca, "no PEM certificate"},
		{"key as CA bundle", cert2, key2, key2, (*secretDir).ca, "no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sd := newSecretDir(t, cert1, key1, caA.CertPEM)
			r := mustNew(t, Config{CertFile: sd.cert(), KeyFile: sd.key(), ClientCAFile: sd.ca()})
			// Clients without certificates are welcome, so the bundle is
			// loaded without this test needing client certificates.
			addr := serve(t, r.ServerConfig(tls.VerifyClientCertIfGiven))
			ccfg := &tls.Config{RootCAs: rootsOf(root)}

			sd.publish(tt.cert, tt.key, tt.ca)
			changed, err := r.Reload()
			if err == nil {
				t.Fatal("Reload accepted broken files")
			}
			if changed {
				t.Error("Reload reported a change despite failing")
			}
			if !strings.Contains(err.Error(), tt.file(sd)) || !strings.Contains(err.Error(), tt.wantErrContain) {
				t.Errorf("error %q does not name %s and say %q", err, tt.file(sd), tt.wantErrContain)
			}
			assertNoKeyBytes(t, err.Error(), key1, key2, otherKey, expKey)
			if r.Failures() != 1 || r.Reloads() != 0 {
				t.Errorf("Failures, Reloads = %d, %d; want 1, 0", r.Failures(), r.Reloads())
			}
			if got, want := mustDial(t, addr, ccfg).serial(), serialOf(t, cert1); got.Cmp(want) != 0 {
				t.Fatalf("after a failed reload the server sends serial %x, want the old %x", got, want)
			}

			// Fixing the files recovers.
			sd.publish(cert2, key2, caA.CertPEM)
			if changed, err := r.Reload(); err != nil || !changed {
				t.Fatalf("Reload of fixed files = %v, %v; want true, nil", changed, err)
			}
			if got, want := mustDial(t, addr, ccfg).serial(), serialOf(t, cert2); got.Cmp(want) != 0 {
				t.Fatalf("after recovery the server sends serial %x, want %x", got, want)
			}
		})
	}
}

// assertNoKeyBytes fails if s quotes any base64 line of any key.
func assertNoKeyBytes(t *testing.T, s string, keys ...[]byte) {
	t.Helper()
	for _, k := range keys {
		for _, line := range strings.Split(string(k), "\n") {
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") && strings.Contains(s, line) {
				t.Fatalf("key bytes leaked into %q", s)
			}
		}
	}
}

// TestPollReportsEachBrokenStateOnce drives poll directly, so it can count
// polls without timing: a broken state is counted and logged once however
// often it is polled, and each new broken state counts again.
func TestPollReportsEachBrokenStateOnce(t *testing.T) {
	root := testpki.NewCA(t, "root")
	cert1, key1 := root.Issue(t, testpki.ServerLeaf())
	cert2, key2 := root.Issue(t, testpki.ServerLeaf())
	var logs testsupport.SyncBuffer
	sd := newSecretDir(t, cert1, key1, nil)
	r := mustNew(t, Config{CertFile: sd.cert(), KeyFile: sd.key(), Logger: testLogger(&logs)})

	steps := []struct {
		name                  string
		cert, key             []byte
		wantFailures, reloads uint64
		wantSerial            *big.Int
	}{
		{"unchanged", cert1, key1, 0, 0, serialOf(t, cert1)},
		{"garbage cert", []byte("junk"), key1, 1, 0, serialOf(t, cert1)},
		{"missing key", cert2, nil, 2, 0, serialOf(t, cert1)},
		{"back to the original", cert1, key1, 2, 0, serialOf(t, cert1)},
		{"mismatched pair", cert2, key1, 3, 0, serialOf(t, cert1)},
		{"rotated", cert2, key2, 3, 1, serialOf(t, cert2)},
	}
	for _, s := range steps {
		sd.publish(s.cert, s.key, nil)
		for range 3 {
			r.poll()
		}
		if r.Failures() != s.wantFailures || r.Reloads() != s.reloads {
			t.Fatalf("%s: Failures, Reloads = %d, %d; want %d, %d", s.name, r.Failures(), r.Reloads(), s.wantFailures, s.reloads)
		}
		if got := r.Leaf().SerialNumber; got.Cmp(s.wantSerial) != 0 {
			t.Fatalf("%s: serving serial %x, want %x", s.name, got, s.wantSerial)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "tls reload failed"); n != 3 {
		t.Errorf("logged %d reload failures, want 3:\n%s", n, out)
	}
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, sd.key()) {
		t.Errorf("failure log lacks level or file name:\n%s", out)
	}
	if n := strings.Count(out, "tls material reloaded"); n != 1 {
		t.Errorf("logged %d reloads, want 1:\n%s", n, out)
	}
	assertNoKeyBytes(t, out, key1, key2)
}

func TestClientAuth(t *testing.T) {
	for _, v := range []struct {
		name    string
		version uint16
	}{{"TLS1.2", tls.VersionTLS12}, {"TLS1.3", tls.VersionTLS13}} {
		t.Run(v.name, func(t *testing.T) {
			serverCA := testpki.NewCA(t, "server CA")
			caA := testpki.NewCA(t, "client CA A")
			caB := testpki.NewCA(t, "client CA B")
			srvCert, srvKey := serverCA.Issue(t, testpki.ServerLeaf())
			sd := newSecretDir(t, srvCert, srvKey, caA.CertPEM)
			r := mustNew(t, Config{CertFile: sd.cert(), KeyFile: sd.key(), ClientCAFile: sd.ca()})
			addr := serve(t, r.ServerConfig(tls.RequireAndVerifyClientCert, "h2"))

			const idA, idB = "spiffe://example.org/ci/team-a", "spiffe://example.org/ci/team-b"
			clientA := clientConfig(t, serverCA, caA, idA)
			clientB := clientConfig(t, serverCA, caB, idB)
			noCert := clientConfig(t, serverCA, nil, "")
			for _, c := range []*tls.Config{clientA, clientB, noCert} {
				c.MaxVersion = v.version
				c.NextProtos = []string{"h2"}
				// A session cache lets the test check that a session from
				// before a CA rotation cannot be resumed after it.
				c.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			}

			if _, err := dial(t, addr, noCert); err == nil {
				t.Error("client without a certificate accepted")
			}
			if _, err := dial(t, addr, clientB); err == nil {
				t.Error("client from another CA accepted")
			}
			a := mustDial(t, addr, clientA)
			if a.id != idA {
				t.Errorf("server saw identity %q, want %q", a.id, idA)
			}
			if p := a.conn.ConnectionState().NegotiatedProtocol; p != "h2" {
				t.Errorf("ALPN = %q, want h2 (per-handshake config lost NextProtos)", p)
			}
			if !mustDial(t, addr, clientA).conn.ConnectionState().DidResume {
				t.Fatal("second connection did not resume; the resumption check below would prove nothing")
			}

			sd.publish(srvCert, srvKey, caB.CertPEM)
			if changed, err := r.Reload(); err != nil || !changed {
				t.Fatalf("Reload = %v, %v; want true, nil", changed, err)
			}
			if c, err := dial(t, addr, clientA); err == nil {
				t.Errorf("client from the replaced CA accepted (resumed: %v)", c.conn.ConnectionState().DidResume)
			}
			b := mustDial(t, addr, clientB)
			if b.id != idB {
				t.Errorf("server saw identity %q, want %q", b.id, idB)
			}
			if err := a.echo("established before the CA rotation"); err != nil {
				t.Errorf("connection from before the CA rotation: %v", err)
			}
		})
	}
}

// Without a client CA file, a verifying ClientAuth must not fall back to the
// system roots: every client certificate is refused.
func TestClientAuthWithoutCAFileFailsClosed(t *testing.T) {
	serverCA := testpki.NewCA(t, "server CA")
	srvCert, srvKey := serverCA.Issue(t, testpki.ServerLeaf())
	certFile, keyFile := testpki.WriteFiles(t, t.TempDir(), "server", srvCert, srvKey)
	var logs testsupport.SyncBuffer
	r := mustNew(t, Config{CertFile: certFile, KeyFile: keyFile, Logger: testLogger(&logs)})

	tests := []struct {
		name       string
		auth       tls.ClientAuthType
		withCert   bool
		wantAccept bool
	}{
		{"require and verify, with cert", tls.RequireAndVerifyClientCert, true, false},
		{"require and verify, no cert", tls.RequireAndVerifyClientCert, false, false},
		{"verify if given, with cert", tls.VerifyClientCertIfGiven, true, false},
		{"verify if given, no cert", tls.VerifyClientCertIfGiven, false, true},
		{"no client cert", tls.NoClientCert, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := r.ServerConfig(tt.auth)
			// A nil pool would mean the system roots; this test's CA is not
			// among them, so only the config shows the difference.
			if tt.auth >= tls.VerifyClientCertIfGiven && cfg.ClientCAs == nil {
				t.Fatal("ClientCAs is nil: client certificates would be verified against the system roots")
			}
			addr := serve(t, cfg)
			issuer := (*testpki.CA)(nil)
			if tt.withCert {
				issuer = serverCA // a CA the server trusts for its own cert, still not for clients
			}
			_, err := dial(t, addr, clientConfig(t, serverCA, issuer, "spiffe://example.org/x"))
			if (err == nil) != tt.wantAccept {
				t.Errorf("dial error = %v, want accepted=%v", err, tt.wantAccept)
			}
		})
	}
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("no error logged for verification without a CA file:\n%s", logs.String())
	}
}

func TestServerConfig(t *testing.T) {
	root := testpki.NewCA(t, "root")
	cert1, key1 := root.Issue(t, testpki.ServerLeaf())
	cert2, key2 := root.Issue(t, testpki.ServerLeaf())
	sd := newSecretDir(t, cert1, key1, root.CertPEM)

	for _, tt := range []struct {
		name string
		ca   string
	}{{"without client CA", ""}, {"with client CA", sd.ca()}} {
		t.Run(tt.name, func(t *testing.T) {
			sd.publish(cert1, key1, root.CertPEM)
			r := mustNew(t, Config{CertFile: sd.cert(), KeyFile: sd.key(), ClientCAFile: tt.ca})
			protos := []string{"h2", "http/1.1"}
			cfg := r.ServerConfig(tls.VerifyClientCertIfGiven, protos...)
			protos[0] = "mutated"

			// hello returns the config and certificate a handshake would use.
			hello := func() (*tls.Config, *tls.Certificate) {
				t.Helper()
				hc := cfg
				if cfg.GetConfigForClient != nil {
					var err error
					if hc, err = cfg.GetConfigForClient(&tls.ClientHelloInfo{}); err != nil {
						t.Fatal(err)
					}
					if hc.ClientCAs == nil || hc.GetConfigForClient != nil || len(hc.Certificates) != 1 {
						t.Fatalf("per-handshake config: ClientCAs %v, GetConfigForClient set %v, %d certificates",
							hc.ClientCAs, hc.GetConfigForClient != nil, len(hc.Certificates))
					}
					return hc, &hc.Certificates[0]
				}
				c, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
				if err != nil {
					t.Fatal(err)
				}
				return hc, c
			}
			hc, c := hello()
			if hc.MinVersion != tls.VersionTLS12 || hc.ClientAuth != tls.VerifyClientCertIfGiven {
				t.Errorf("MinVersion %x, ClientAuth %v", hc.MinVersion, hc.ClientAuth)
			}
			if got := strings.Join(hc.NextProtos, ","); got != "h2,http/1.1" {
				t.Errorf("NextProtos = %s, want a copy of h2,http/1.1", got)
			}
			if c.Leaf.SerialNumber.Cmp(serialOf(t, cert1)) != 0 {
				t.Error("initial certificate not served")
			}
			sd.publish(cert2, key2, root.CertPEM)
			if _, err := r.Reload(); err != nil {
				t.Fatal(err)
			}
			if _, c := hello(); c.Leaf.SerialNumber.Cmp(serialOf(t, cert2)) != 0 {
				t.Error("reloaded certificate not served to the next handshake")
			}
		})
	}
}

// TestConcurrentHandshakesDuringReload is for -race: handshakes read the
// material while reloads swap it.
func TestConcurrentHandshakesDuringReload(t *testing.T) {
	root := testpki.NewCA(t, "root")
	caA := testpki.NewCA(t, "client CA")
	cert1, key1 := root.Issue(t, testpki.ServerLeaf())
	cert2, key2 := root.Issue(t, testpki.ServerLeaf())
	s1, s2 := serialOf(t, cert1), serialOf(t, cert2)
	sd := newSecretDir(t, cert1, key1, caA.CertPEM)
	r := mustNew(t, Config{CertFile: sd.cert(), KeyFile: sd.key(), ClientCAFile: sd.ca()})
	addr := serve(t, r.ServerConfig(tls.RequireAndVerifyClientCert))
	ccfg := clientConfig(t, root, caA, "spiffe://example.org/load")

	errs := make(chan error, 100)
	stop := testsupport.Hammer(t, 2, func() bool {
		d := &net.Dialer{Timeout: 5 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", addr, ccfg)
		if err != nil {
			errs <- err
			return false
		}
		got := conn.ConnectionState().PeerCertificates[0].SerialNumber
		conn.Close()
		if got.Cmp(s1) != 0 && got.Cmp(s2) != 0 {
			errs <- fmt.Errorf("unexpected serial %x", got)
			return false
		}
		_ = r.Leaf().NotAfter
		return true
	})
	for i := range 20 {
		if i%2 == 0 {
			sd.publish(cert2, key2, caA.CertPEM)
		} else {
			sd.publish(cert1, key1, caA.CertPEM)
		}
		if changed, err := r.Reload(); err != nil || !changed {
			t.Errorf("reload %d = %v, %v", i, changed, err)
		}
	}
	stop()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if r.Reloads() != 20 {
		t.Errorf("Reloads = %d, want 20", r.Reloads())
	}
}

func TestNewErrors(t *testing.T) {
	root := testpki.NewCA(t, "root")
	certPEM, keyPEM := root.Issue(t, testpki.ServerLeaf())
	_, otherKey := root.Issue(t, testpki.ServerLeaf())
	expCert, expKey := issueExpired(t, root)
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2, 3}})

	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert := write("good.crt", certPEM)
	key := write("good.key", keyPEM)
	missing := filepath.Join(dir, "missing.pem")
	garbage := write("garbage.pem", []byte("this is not PEM"))
	other := write("other.key", otherKey)
	expiredCert, expiredKey := write("expired.crt", expCert), write("expired.key", expKey)
	empty := write("empty.pem", nil)
	enc := write("encrypted.key", encrypted)

	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error
		is   error
	}{
		{"no cert file", Config{KeyFile: key}, []string{"cert file and a key file are required"}, nil},
		{"negative interval", Config{CertFile: cert, KeyFile: key, Interval: -time.Second}, []string{"negative poll interval"}, nil},
		{"missing cert", Config{CertFile: missing, KeyFile: key}, []string{"cert file " + missing, "no such file"}, fs.ErrNotExist},
		{"missing key", Config{CertFile: cert, KeyFile: missing}, []string{"key file " + missing}, fs.ErrNotExist},
		{"directory as cert", Config{CertFile: dir, KeyFile: key}, []string{"cert file " + dir, "not a regular file"}, nil},
		{"cert not PEM", Config{CertFile: garbage, KeyFile: key}, []string{"cert file " + garbage, "no PEM data"}, nil},
		{"key not PEM", Config{CertFile: cert, KeyFile: garbage}, []string{"key file " + garbage, "no PEM data"}, nil},
		{"key mismatch", Config{CertFile: cert, KeyFile: other}, []string{"key file " + other, "does not match the certificate in " + cert}, nil},
		{"encrypted key", Config{CertFile: cert, KeyFile: enc}, []string{"key file " + enc, "encrypted"}, nil},
		{"expired cert", Config{CertFile: expiredCert, KeyFile: expiredKey}, []string{"cert file " + expiredCert, "expired at"}, nil},
		{"empty CA bundle", Config{CertFile: cert, KeyFile: key, ClientCAFile: empty}, []string{"client CA file " + empty, "holds no PEM certificate"}, nil},
		{"CA bundle of keys", Config{CertFile: cert, KeyFile: key, ClientCAFile: key}, []string{"client CA file " + key, "holds no PEM certificate"}, nil},
		{"missing CA bundle", Config{CertFile: cert, KeyFile: key, ClientCAFile: missing}, []string{"client CA file " + missing}, fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Logger = testLogger(nil)
			r, err := New(tt.cfg)
			if err == nil {
				t.Fatalf("New succeeded: %+v", r)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q is not %v", err, tt.is)
			}
			assertNoKeyBytes(t, err.Error(), keyPEM, otherKey, expKey)
		})
	}
}

func TestNewAcceptsFormats(t *testing.T) {
	root := testpki.NewCA(t, "root")
	inter := root.Intermediate(t, "inter")
	certPEM, keyPEM := root.Issue(t, testpki.ServerLeaf())
	chainPEM, chainKey := inter.Issue(t, testpki.ServerLeaf())

	b, _ := pem.Decode(keyPEM)
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sec1DER, err := x509.MarshalECPrivateKey(k.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	sec1 := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1DER})
	// What `openssl ecparam -genkey` writes: parameters, then the key.
	params := pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}})
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

	tests := []struct {
		name          string
		cert, key     []byte
		combined      bool // one file holds both, as CertFile and KeyFile
		wantChainLen  int
		wantSerialPEM []byte
	}{
		{"PKCS#8", certPEM, keyPEM, false, 1, certPEM},
		{"SEC 1", certPEM, sec1, false, 1, certPEM},
		{"EC PARAMETERS first", certPEM, cat(params, sec1), false, 1, certPEM},
		{"chain", chainPEM, chainKey, false, 2, chainPEM},
		{"combined key then chain", cat(chainKey, chainPEM), nil, true, 2, chainPEM},
		{"combined chain then key", cat(chainPEM, chainKey), nil, true, 2, chainPEM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Logger: testLogger(nil)}
			if tt.combined {
				cfg.CertFile = filepath.Join(dir, "tls.pem")
				cfg.KeyFile = cfg.CertFile
				if err := os.WriteFile(cfg.CertFile, tt.cert, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				cfg.CertFile, cfg.KeyFile = testpki.WriteFiles(t, dir, "tls", tt.cert, tt.key)
			}
			r := mustNew(t, cfg)
			if got := r.Leaf().SerialNumber; got.Cmp(serialOf(t, tt.wantSerialPEM)) != 0 {
				t.Errorf("leaf serial %x is not the first certificate's", got)
			}
			if n := len(r.cur.Load().cert.Certificate); n != tt.wantChainLen {
				t.Errorf("chain length %d, want %d", n, tt.wantChainLen)
			}
		})
	}
}

func TestKeyModeWarning(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	root := testpki.NewCA(t, "root")
	certPEM, keyPEM := root.Issue(t, testpki.ServerLeaf())
	for _, tt := range []struct {
		mode     os.FileMode
		wantWarn bool
	}{{0o600, false}, {0o400, false}, {0o640, true}, {0o604, true}, {0o644, true}} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			certFile, keyFile := testpki.WriteFiles(t, t.TempDir(), "tls", certPEM, keyPEM)
			if err := os.Chmod(keyFile, tt.mode); err != nil {
				t.Fatal(err)
			}
			var logs testsupport.SyncBuffer
			mustNew(t, Config{CertFile: certFile, KeyFile: keyFile, Logger: testLogger(&logs)})
			out := logs.String()
			warned := strings.Contains(out, "readable by group or others") && strings.Contains(out, "key_file="+keyFile)
			if warned != tt.wantWarn {
				t.Errorf("warned = %v, want %v; log:\n%s", warned, tt.wantWarn, out)
			}
			assertNoKeyBytes(t, out, keyPEM)
		})
	}
}
