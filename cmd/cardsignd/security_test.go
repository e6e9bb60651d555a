package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/internal/testpki"
)

// pki is a test certificate authority with a server certificate and client
// certificates for cardsignd, all as files.
type pki struct {
	dir                       string
	ca                        *testpki.CA
	caFile                    string
	serverCert, serverKey     string
	clientCert, clientKey     string // spiffe://example.org/ci/team-a, from ca
	strangerCert, strangerKey string // from another CA
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), ca: testpki.NewCA(t, "cardsign test CA")}
	p.caFile = filepath.Join(p.dir, "ca.pem")
	writeFile(t, p.caFile, string(p.ca.CertPEM))
	c, k := p.ca.Issue(t, testpki.ServerLeaf())
	p.serverCert, p.serverKey = testpki.WriteFiles(t, p.dir, "server", c, k)
	c, k = p.ca.Issue(t, testpki.Leaf{CommonName: "team-a ci", URIs: []string{"spiffe://example.org/ci/team-a"}, Client: true})
	p.clientCert, p.clientKey = testpki.WriteFiles(t, p.dir, "client", c, k)
	other := testpki.NewCA(t, "someone else's CA")
	c, k = other.Issue(t, testpki.Leaf{CommonName: "stranger", URIs: []string{"spiffe://example.org/ci/team-a"}, Client: true})
	p.strangerCert, p.strangerKey = testpki.WriteFiles(t, p.dir, "stranger", c, k)
	return p
}

// token makes a bearer token and returns it with its SHA-256 in hex.
func token(name string) (tok, sum string) {
	tok = "cst_test_" + name + "_" + fmt.Sprint(time.Now().UnixNano())
	h := sha256.Sum256([]byte(tok))
	return tok, hex.EncodeToString(h[:])
}

// secureDaemon is a cardsignd with mTLS, tokens, a signing policy and a low
// rate limit.
type secureDaemon struct {
	*daemon
	pki                                       *pki
	work                                      string
	signerTok, adminTok, auditorTok, floodTok string
	signerFile, adminFile, auditorFile        string
	httpc                                     *http.Client
}

// startSecureDaemon starts cardsignd with mTLS, four tokens and a policy;
// limits is the config's limits section.
func startSecureDaemon(t *testing.T, limits string) *secureDaemon {
	t.Helper()
	s := &secureDaemon{pki: newPKI(t), work: t.TempDir()}
	var signerSum, adminSum, auditorSum, floodSum string
	s.signerTok, signerSum = token("pipeline-a")
	s.adminTok, adminSum = token("ops")
	s.auditorTok, auditorSum = token("audit")
	s.floodTok, floodSum = token("flood")
	for _, f := range []struct {
		dst  *string
		name string
		tok  string
	}{{&s.signerFile, "signer.token", s.signerTok}, {&s.adminFile, "admin.token", s.adminTok}, {&s.auditorFile, "auditor.token", s.auditorTok}} {
		*f.dst = filepath.Join(s.work, f.name)
		if err := os.WriteFile(*f.dst, []byte(f.tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config := fmt.Sprintf(`
tls:
  cert_file: %s
  key_file: %s
  client_ca_file: %s
  client_auth: require
  reload_interval: 1s
auth:
  tokens:
    - name: pipeline-a
      sha256: %s
      roles: [signer]
    - name: ops
      sha256: %s
      roles: [admin]
    - name: audit
      sha256: %s
      roles: [auditor]
    - name: flood
      sha256: %s
      roles: [signer]
  clients:
    - identity: spiffe://example.org/ci/*
      roles: [signer]
policy:
  rules:
    - name: team-a
      identities: ["token:pipeline-a", "token:flood", "cert:spiffe://example.org/ci/team-a"]
      card_names: ["*"]
      hosts: ["*.example.com"]
%s
readiness:
  interval: 500ms
`, s.pki.serverCert, s.pki.serverKey, s.pki.caFile, signerSum, adminSum, auditorSum, floodSum, limits)
	cfgFile := filepath.Join(s.work, "cardsignd.yaml")
	writeFile(t, cfgFile, config)
	if r := runDaemonOnce(t, "--check-config", cfgFile); r.Code != 0 {
		t.Fatalf("--check-config refused the test config: %s", r.Stderr)
	}
	s.daemon = startDaemon(t, filepath.Join(s.work, "data"), "--config", cfgFile)
	return s
}

// cliAs runs cardsign against the secure daemon with the client certificate
// and, when tokenFile is set, a bearer token.
func (s *secureDaemon) cliAs(t *testing.T, tokenFile string, args ...string) result {
	t.Helper()
	full := append(args, "--server", s.grpc, "--ca-file", s.pki.caFile, "--cert-file", s.pki.clientCert, "--key-file", s.pki.clientKey)
	if tokenFile != "" {
		full = append(full, "--token-file", tokenFile)
	}
	return cli(t, s.work, nil, full...)
}

// conn is a Go gRPC client with the test client certificate and a token.
func (s *secureDaemon) conn(t testing.TB, tok string, certFile, keyFile string) *grpc.ClientConn {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.pki.ca.CertPEM)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}
	if tok != "" {
		opts = append(opts, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok), method, req, reply, cc, o...)
		}))
	}
	conn, err := grpc.NewClient(s.grpc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// httpsGet fetches from the daemon's HTTP listener, trusting the test CA.
func (s *secureDaemon) httpsGet(t *testing.T, path, tok string, header ...string) (*http.Response, []byte) {
	t.Helper()
	if s.httpc == nil {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(s.pki.ca.CertPEM)
		s.httpc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 10 * time.Second}
		t.Cleanup(s.httpc.CloseIdleConnections)
	}
	c := s.httpc
	req, _ := http.NewRequest(http.MethodGet, "https://"+s.http+path, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, []byte(b.String())
}

// metric returns the sum of a metric's samples whose labels include every
// given name=value pair.
func metric(t *testing.T, body []byte, name string, labels map[string]string) float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	fam, ok := fams[name]
	if !ok {
		return 0
	}
	sum := 0.0
	for _, m := range fam.GetMetric() {
		match := true
		for k, v := range labels {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// runDaemonOnce runs cardsignd to completion (--check-config, or a start
// that must fail) and returns its output.
func runDaemonOnce(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(daemonBin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("cardsignd %v did not exit within 30s: %s", args, errb.String())
	}
	return result{Stdout: out.String(), Stderr: errb.String(), Code: cmd.ProcessState.ExitCode()}
}

func TestDaemonExposureRules(t *testing.T) {
	work := t.TempDir()
	// Beyond loopback without TLS and authentication: refused, saying what
	// to configure.
	r := runDaemonOnce(t, "--data-dir", filepath.Join(work, "data"), "--grpc-addr", "0.0.0.0:0", "--http-addr", "127.0.0.1:0")
	if r.Code == 0 || !strings.Contains(r.Stderr, "grpc_addr") || !strings.Contains(r.Stderr, "tls.cert_file") || !strings.Contains(r.Stderr, "auth.tokens") {
		t.Fatalf("0.0.0.0 without TLS: exit %d\n%s", r.Code, r.Stderr)
	}
	// With TLS and a token it starts, and serves.
	p := newPKI(t)
	tok, sum := token("ci")
	cfg := filepath.Join(work, "exposed.yaml")
	writeFile(t, cfg, fmt.Sprintf("tls:\n  cert_file: %s\n  key_file: %s\nauth:\n  tokens:\n    - {name: ci, sha256: %s, roles: [signer]}\n", p.serverCert, p.serverKey, sum))
	d := startDaemon(t, filepath.Join(work, "data"), "--config", cfg, "--grpc-addr", "0.0.0.0:0", "--http-addr", "0.0.0.0:0")
	port := d.grpc[strings.LastIndex(d.grpc, ":")+1:]
	tokFile := filepath.Join(work, "ci.token")
	writeFile(t, tokFile, tok)
	if r := cli(t, work, nil, "sign", "--server", "127.0.0.1:"+port, "--ca-file", p.caFile, "--token-file", tokFile, cardFile("security.json")); r.Code != 0 {
		t.Fatalf("sign on the exposed daemon: %s", r.Stderr)
	}
	if r := cli(t, work, nil, "sign", "--server", "127.0.0.1:"+port, "--ca-file", p.caFile, cardFile("security.json")); r.Code == 0 || !strings.Contains(r.Stderr, "Unauthenticated") {
		t.Fatalf("anonymous sign on the exposed daemon: exit %d %s", r.Code, r.Stderr)
	}
	d.stop()
}

func TestDaemonTLSTokensRolesPolicy(t *testing.T) {
	s := startSecureDaemon(t, "limits:\n  rate: 2\n  burst: 20")
	card := cardFile("security.json")

	// Transport: no client certificate, or one from another CA, is refused
	// at the handshake; the CLI reports it.
	if r := cli(t, s.work, nil, "sign", "--server", s.grpc, "--ca-file", s.pki.caFile, "--token-file", s.signerFile, card); r.Code == 0 {
		t.Fatalf("signed without a client certificate: %s", r.Stdout)
	}
	if r := cli(t, s.work, nil, "sign", "--server", s.grpc, "--ca-file", s.pki.caFile, "--cert-file", s.pki.strangerCert, "--key-file", s.pki.strangerKey, "--token-file", s.signerFile, card); r.Code == 0 {
		t.Fatalf("signed with a certificate from another CA: %s", r.Stdout)
	}
	// Plaintext to a TLS listener fails too.
	if r := cli(t, s.work, nil, "sign", "--server", s.grpc, "--token-file", s.signerFile, card); r.Code == 0 {
		t.Fatal("signed over plaintext")
	}

	// The client certificate alone identifies a signer (auth.clients).
	signedByCert := s.cliAs(t, "", "sign", card)
	if signedByCert.Code != 0 {
		t.Fatalf("sign with the client certificate: %s", signedByCert.Stderr)
	}
	// A signer token signs, and cannot rotate keys.
	if r := s.cliAs(t, s.signerFile, "sign", card); r.Code != 0 {
		t.Fatalf("sign with the signer token: %s", r.Stderr)
	}
	r := s.cliAs(t, s.signerFile, "keys", "rotate")
	if r.Code == 0 || !strings.Contains(r.Stderr, "PermissionDenied") {
		t.Fatalf("a signer rotated keys: exit %d %s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "PermissionDenied: permission denied") {
		t.Fatalf("the daemon's refusal should be the generic one: %s", r.Stderr)
	}
	// An unknown token is UNAUTHENTICATED with no hint.
	bad := filepath.Join(s.work, "bad.token")
	writeFile(t, bad, "cst_not_a_token")
	if r := s.cliAs(t, bad, "sign", card); r.Code == 0 || !strings.Contains(r.Stderr, "Unauthenticated: authentication required") {
		t.Fatalf("unknown token: exit %d %s", r.Code, r.Stderr)
	}
	// The admin can rotate, and cannot sign.
	if r := s.cliAs(t, s.adminFile, "keys", "rotate", "--prepublish", "0s"); r.Code != 0 {
		t.Fatalf("admin rotate: %s", r.Stderr)
	}
	if r := s.cliAs(t, s.adminFile, "sign", card); r.Code == 0 || !strings.Contains(r.Stderr, "PermissionDenied") {
		t.Fatalf("admin signed: exit %d %s", r.Code, r.Stderr)
	}

	// Policy: a card pointing at a host outside the rule is refused, says
	// which rule refused, and is audited as refused with the caller.
	evil := filepath.Join(s.work, "evil.json")
	data, _ := os.ReadFile(card)
	writeFile(t, evil, strings.ReplaceAll(string(data), "https://secure.example.com/a2a", "https://secure.example.com.attacker.net/a2a"))
	r = s.cliAs(t, s.signerFile, "sign", evil)
	if r.Code == 0 || !strings.Contains(r.Stderr, "PermissionDenied") || !strings.Contains(r.Stderr, `rule "team-a"`) || !strings.Contains(r.Stderr, "attacker.net") {
		t.Fatalf("policy refusal: exit %d %s", r.Code, r.Stderr)
	}
	if r := s.cliAs(t, s.signerFile, "audit", "list"); r.Code == 0 || !strings.Contains(r.Stderr, "PermissionDenied") {
		t.Fatalf("a signer listed the audit log: exit %d %s", r.Code, r.Stderr)
	}
	list := s.cliAs(t, s.auditorFile, "audit", "list", "--json")
	if list.Code != 0 {
		t.Fatalf("auditor audit list: %s", list.Stderr)
	}
	var refused, signed int
	callers := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(list.Stdout), "\n") {
		var rec struct{ Outcome, Reason, Caller string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		callers[rec.Caller] = true
		switch rec.Outcome {
		case "refused":
			refused++
			if rec.Caller != "token:pipeline-a" || !strings.Contains(rec.Reason, "team-a") || !strings.Contains(rec.Reason, "attacker.net") {
				t.Errorf("refused record: %+v", rec)
			}
		case "signed":
			signed++
		}
	}
	if refused != 1 || signed < 2 || !callers["cert:spiffe://example.org/ci/team-a"] || !callers["token:pipeline-a"] {
		t.Fatalf("audit log: %d refused, %d signed, callers %v\n%s", refused, signed, callers, list.Stdout)
	}
	if r := s.cliAs(t, s.auditorFile, "audit", "verify"); r.Code != 0 {
		t.Fatalf("audit verify: %s%s", r.Stdout, r.Stderr)
	}

	// JWKS over HTTPS; /metrics needs the auditor role.
	if resp, body := s.httpsGet(t, "/.well-known/jwks.json", ""); resp.StatusCode != 200 || len(kids(t, body)) < 2 {
		t.Fatalf("JWKS over https: %d %s", resp.StatusCode, body)
	}
	if resp, _ := s.httpsGet(t, "/metrics", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token: %d", resp.StatusCode)
	}
	if resp, _ := s.httpsGet(t, "/metrics", s.signerTok); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("/metrics with a signer token: %d", resp.StatusCode)
	}
	resp, before := s.httpsGet(t, "/metrics", s.auditorTok)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	signedLabels := map[string]string{"result": "signed", "caller": "token:pipeline-a", "alg": "ES256", "backend": "file"}
	n0 := metric(t, before, "cardsign_signatures_total", signedLabels)
	for range 3 {
		if r := s.cliAs(t, s.signerFile, "sign", card); r.Code != 0 {
			t.Fatalf("sign: %s", r.Stderr)
		}
	}
	_, after := s.httpsGet(t, "/metrics", s.auditorTok)
	// With a pending key (rotated above, prepublish 0s activates at once),
	// each card carries one signature per signing key.
	if n1 := metric(t, after, "cardsign_signatures_total", signedLabels); n1 < n0+3 {
		t.Fatalf("cardsign_signatures_total{result=signed,caller=token:pipeline-a} went from %v to %v after 3 signatures", n0, n1)
	}
	if v := metric(t, after, "cardsign_sign_requests_total", map[string]string{"result": "refused", "caller": "token:pipeline-a"}); v != 1 {
		t.Fatalf("refused sign requests: %v", v)
	}
	if v := metric(t, after, "cardsign_sign_requests_total", map[string]string{"result": "signed", "caller": "token:pipeline-a"}); v != 4 {
		t.Fatalf("signed sign requests by token:pipeline-a: %v", v)
	}
	// Certificate callers are labelled by the auth.clients pattern that
	// admitted them, not by each certificate's identity.
	if v := metric(t, after, "cardsign_sign_requests_total", map[string]string{"result": "signed", "caller": "cert:spiffe://example.org/ci/*"}); v != 1 {
		t.Fatalf("signed sign requests by the client certificate pattern: %v\n%s", v, grep(after, "cardsign_sign_requests_total"))
	}
	for _, name := range []string{"cardsign_sign_duration_seconds", "cardsign_backend_sign_duration_seconds", "cardsign_audit_commit_duration_seconds"} {
		if metric(t, after, name, nil) <= metric(t, before, name, nil) {
			t.Errorf("%s did not move", name)
		}
	}
	if metric(t, after, "cardsign_keys", map[string]string{"state": "active"}) != 1 {
		t.Errorf("cardsign_keys{state=active} is not 1")
	}
	if metric(t, after, "cardsign_ready", nil) != 1 {
		t.Errorf("cardsign_ready is not 1")
	}
	s.httpsGet(t, "/.well-known/jwks.json", "")
	resp, _ = s.httpsGet(t, "/.well-known/jwks.json", "")
	if r, _ := s.httpsGet(t, "/.well-known/jwks.json", "", "If-None-Match", resp.Header.Get("ETag")); r.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", r.StatusCode)
	}
	_, after = s.httpsGet(t, "/metrics", s.auditorTok)
	if metric(t, after, "cardsign_jwks_requests_total", map[string]string{"document": "jwks", "code": "304"}) < 1 ||
		metric(t, after, "cardsign_jwks_requests_total", map[string]string{"document": "jwks", "code": "200"}) < 3 {
		t.Errorf("JWKS request counters did not move:\n%s", grep(after, "cardsign_jwks_requests_total"))
	}

	// Rate limit: a burst beyond the bucket gets RESOURCE_EXHAUSTED with a
	// retry delay; other identities are unaffected.
	flood := pb.NewSigningServiceClient(s.conn(t, s.floodTok, s.pki.clientCert, s.pki.clientKey))
	exhausted := 0
	var retry time.Duration
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := flood.LintCard(ctx, &pb.LintCardRequest{Card: data})
			if status.Code(err) == codes.ResourceExhausted {
				mu.Lock()
				exhausted++
				for _, d := range status.Convert(err).Details() {
					if ri, ok := d.(*errdetails.RetryInfo); ok {
						retry = ri.GetRetryDelay().AsDuration()
					}
				}
				mu.Unlock()
			} else if err != nil {
				t.Errorf("flood: %v", err)
			}
		}()
	}
	wg.Wait()
	if exhausted < 15 || retry <= 0 || retry > time.Second {
		t.Fatalf("40 calls against a burst of 20: %d RESOURCE_EXHAUSTED, retry delay %v", exhausted, retry)
	}
	if r := s.cliAs(t, s.signerFile, "sign", card); r.Code != 0 {
		t.Fatalf("another identity was limited too: %s", r.Stderr)
	}
	_, after = s.httpsGet(t, "/metrics", s.auditorTok)
	if v := metric(t, after, "cardsign_rate_limited_total", map[string]string{"caller": "token:flood"}); int(v) != exhausted {
		t.Errorf("cardsign_rate_limited_total{caller=token:flood} = %v, want %d", v, exhausted)
	}

	// TLS reload on SIGHUP: a new certificate serves new connections while
	// a connection made before keeps working.
	old := pb.NewSigningServiceClient(s.conn(t, s.signerTok, s.pki.clientCert, s.pki.clientKey))
	lint := func(c pb.SigningServiceClient) error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := c.LintCard(ctx, &pb.LintCardRequest{Card: data})
		return err
	}
	time.Sleep(time.Second) // the flood token's bucket is not ours, but keep clear of the signer's
	if err := lint(old); err != nil {
		t.Fatal(err)
	}
	serialBefore := s.serverSerial(t)
	leaf := testpki.ServerLeaf()
	c, k := s.pki.ca.Issue(t, leaf)
	testpki.WriteFiles(t, s.pki.dir, "server", c, k)
	s.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for s.serverSerial(t) == serialBefore {
		if time.Now().After(deadline) {
			t.Fatalf("the new certificate is not served after SIGHUP\n%s", s.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := lint(old); err != nil {
		t.Fatalf("a connection made before the reload broke: %v", err)
	}
	s.stop()
}

// serverSerial returns the serial of the certificate the gRPC listener
// presents to a new connection.
func (s *secureDaemon) serverSerial(t *testing.T) string {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.pki.ca.CertPEM)
	cert, err := tls.LoadX509KeyPair(s.pki.clientCert, s.pki.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", s.grpc, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func grep(body []byte, prefix string) string {
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
