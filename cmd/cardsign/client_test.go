package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/internal/testpki"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// These tests check only the client's transport: the flags, TLS, client
// certificates and the bearer token as a gRPC server sees them. The daemon's
// own authentication is tested end to end in cmd/cardsignd.

// testToken is what the tests send; no output may ever contain it.
const testToken = "cst_client-test-token-0123456789abcdefABCDEF"

// recorder is a SigningService that records what each SignCard call
// presented and echoes the card, or fails with refuse.
type recorder struct {
	pb.UnimplementedSigningServiceServer
	refuse error

	mu     sync.Mutex
	calls  int
	auth   []string // the authorization metadata of the last call
	peerCN string   // the verified client certificate's CommonName, if any
}

func (r *recorder) SignCard(ctx context.Context, req *pb.SignCardRequest) (*pb.SignCardResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	cn := ""
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
			cn = ti.State.VerifiedChains[0][0].Subject.CommonName
		}
	}
	r.mu.Lock()
	r.calls++
	r.auth, r.peerCN = md.Get("authorization"), cn
	r.mu.Unlock()
	if r.refuse != nil {
		return nil, r.refuse
	}
	return &pb.SignCardResponse{SignedCard: req.GetCard()}, nil
}

func (r *recorder) seen() (calls int, auth []string, peerCN string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, r.auth, r.peerCN
}

// serve starts a gRPC server on loopback with r behind cfg (plaintext when
// cfg is nil) and returns its address.
func serve(t *testing.T, cfg *tls.Config, r *recorder) string {
	t.Helper()
	var opts []grpc.ServerOption
	if cfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	return serveGRPC(t, listenLoopback(t), func(srv *grpc.Server) { pb.RegisterSigningServiceServer(srv, r) }, opts...)
}

// listenLoopback listens on a free loopback port.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// serveGRPC serves the services register adds on lis until the test ends,
// and returns its address.
func serveGRPC(t *testing.T, lis net.Listener, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	srv := grpc.NewServer(opts...)
	register(srv)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// serverTLS is the TLS config of a server whose certificate ca issued for
// localhost, 127.0.0.1 and ::1. With clientCA, it requires a client
// certificate clientCA issued.
func serverTLS(t *testing.T, ca, clientCA *testpki.CA) *tls.Config {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, testpki.ServerLeaf())
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.Cert)
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg
}

// clearConnEnv keeps the developer's own CARDSIGN_* settings out of a test.
func clearConnEnv(t *testing.T) {
	for _, v := range []string{serverEnv, caFileEnv, tlsEnv, certFileEnv, keyFileEnv, tokenEnv} {
		t.Setenv(v, "")
	}
}

// runCLI runs cardsign in-process and returns its output and exit code.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb}, args)
	return result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// fixture is a test CA, a card file and a 0600 token file in a temp dir.
type fixture struct {
	dir, caFile, cardFile, tokenFile string
	ca                               *testpki.CA
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	clearConnEnv(t)
	dir := t.TempDir()
	f := fixture{dir: dir, ca: testpki.NewCA(t, "cardsign test CA")}
	f.caFile = filepath.Join(dir, "ca.pem")
	writeFile(t, f.caFile, f.ca.CertPEM)
	f.cardFile = filepath.Join(dir, "card.json")
	writeFile(t, f.cardFile, []byte(`{"name":"test"}`))
	f.tokenFile = testsupport.WriteFileMode(t, filepath.Join(dir, "token"), testToken+"\n", 0o600)
	return f
}

// mustNotLeak fails the test if the token appears in r's output.
func mustNotLeak(t *testing.T, r result) {
	t.Helper()
	if strings.Contains(r.Stdout+r.Stderr, testToken) || strings.Contains(r.Stdout+r.Stderr, testToken[4:20]) {
		t.Errorf("the token appears in the output:\nstdout: %s\nstderr: %s", r.Stdout, r.Stderr)
	}
}

func TestClientSendsBearerTokenOverTLS(t *testing.T) {
	f := newFixture(t)
	rec := &recorder{}
	addr := serve(t, serverTLS(t, f.ca, nil), rec)
	_, port, _ := net.SplitHostPort(addr)
	cases := []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"token-file", nil, []string{"--server", addr, "--ca-file", f.caFile, "--token-file", f.tokenFile}},
		{"token and CA from the environment", map[string]string{tokenEnv: testToken, caFileEnv: f.caFile, serverEnv: addr}, nil},
		{"server-name", nil, []string{"--server", "127.0.0.1:" + port, "--server-name", "localhost", "--ca-file", f.caFile, "--token-file", f.tokenFile}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			r := runCLI(t, append([]string{"sign"}, append(tc.args, f.cardFile)...)...)
			if r.Code != exitOK || r.Stdout != `{"name":"test"}` {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
			}
			if _, auth, _ := rec.seen(); len(auth) != 1 || auth[0] != "Bearer "+testToken {
				t.Errorf("authorization metadata %q, want one Bearer token", auth)
			}
			mustNotLeak(t, r)
		})
	}
}

func TestClientPresentsCertificate(t *testing.T) {
	f := newFixture(t)
	clientCA := testpki.NewCA(t, "cardsign test client CA")
	rec := &recorder{}
	addr := serve(t, serverTLS(t, f.ca, clientCA), rec)
	certPEM, keyPEM := clientCA.Issue(t, testpki.Leaf{CommonName: "ci-runner", URIs: []string{"spiffe://example.org/ci/runner"}, Client: true})
	certFile, keyFile := testpki.WriteFiles(t, f.dir, "client", certPEM, keyPEM)

	r := runCLI(t, "sign", "--server", addr, "--ca-file", f.caFile, "--cert-file", certFile, "--key-file", keyFile, f.cardFile)
	if r.Code != exitOK {
		t.Fatalf("with a client certificate: exit %d\nstderr: %s", r.Code, r.Stderr)
	}
	if _, auth, cn := rec.seen(); cn != "ci-runner" || len(auth) != 0 {
		t.Errorf("server saw client certificate %q and authorization %q, want ci-runner and none", cn, auth)
	}

	t.Setenv(certFileEnv, certFile)
	t.Setenv(keyFileEnv, keyFile)
	if r := runCLI(t, "sign", "--server", addr, "--ca-file", f.caFile, f.cardFile); r.Code != exitOK {
		t.Fatalf("with the client certificate from the environment: exit %d\nstderr: %s", r.Code, r.Stderr)
	}
	t.Setenv(certFileEnv, "")
	t.Setenv(keyFileEnv, "")

	r = runCLI(t, "sign", "--server", addr, "--ca-file", f.caFile, f.cardFile)
	if r.Code == exitOK || !strings.Contains(r.Stderr, "--cert-file") {
		t.Errorf("without a client certificate: exit %d, stderr %s; want a failure that points to --cert-file", r.Code, r.Stderr)
	}
	r = runCLI(t, "sign", "--server", addr, "--ca-file", f.caFile, "--cert-file", certFile, f.cardFile)
	if r.Code != exitUsage || !strings.Contains(r.Stderr, "--cert-file and --key-file go together") {
		t.Errorf("--cert-file alone: exit %d, stderr %s", r.Code, r.Stderr)
	}
}

func TestClientRejectsServerFromUnknownCA(t *testing.T) {
	f := newFixture(t)
	rec := &recorder{}
	addr := serve(t, serverTLS(t, testpki.NewCA(t, "someone else's CA"), nil), rec)
	r := runCLI(t, "sign", "--server", addr, "--ca-file", f.caFile, "--token-file", f.tokenFile, f.cardFile)
	if r.Code == exitOK || !strings.Contains(r.Stderr, "certificate signed by unknown authority") ||
		!strings.Contains(r.Stderr, "hint: cardsignd's certificate did not verify: pass --ca-file") {
		t.Errorf("exit %d, stderr %s; want a verification failure with a hint", r.Code, r.Stderr)
	}
	if calls, _, _ := rec.seen(); calls != 0 {
		t.Errorf("the server got %d calls through an unverified connection", calls)
	}
	mustNotLeak(t, r)
}

func TestClientTLSWithSystemRootsRejectsTestCA(t *testing.T) {
	f := newFixture(t)
	rec := &recorder{}
	addr := serve(t, serverTLS(t, f.ca, nil), rec)
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{"--tls", []string{"--tls"}, ""},
		{tlsEnv + "=1", nil, "1"},
		{tlsEnv + "=true", nil, "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tlsEnv, tc.env)
			args := append(append([]string{"sign", "--server", addr, "--token-file", f.tokenFile}, tc.args...), f.cardFile)
			r := runCLI(t, args...)
			if r.Code == exitOK || !strings.Contains(r.Stderr, "x509:") {
				t.Errorf("exit %d, stderr %s; want a certificate verification failure", r.Code, r.Stderr)
			}
			mustNotLeak(t, r)
		})
	}
	if calls, _, _ := rec.seen(); calls != 0 {
		t.Errorf("the server got %d calls", calls)
	}
}

func TestClientRefusesPlaintextOffLoopback(t *testing.T) {
	f := newFixture(t)
	t.Setenv(tokenEnv, testToken)
	for _, addr := range []string{"192.0.2.1:7700", "cardsign.example.com:7700", "[2001:db8::1]:7700"} {
		start := time.Now()
		r := runCLI(t, "sign", "--server", addr, f.cardFile)
		if r.Code != exitUsage || !strings.Contains(r.Stderr, "not on this machine: refusing to connect in clear text") ||
			!strings.Contains(r.Stderr, "--ca-file") || !strings.Contains(r.Stderr, "--tls") {
			t.Errorf("%s: exit %d, stderr %s", addr, r.Code, r.Stderr)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: refusing took %s: it must not dial", addr, d)
		}
		mustNotLeak(t, r)
	}
	// dial refuses before it makes a connection.
	cl, err := dial(env{stderr: new(bytes.Buffer)}, &connFlags{server: "192.0.2.1:7700"}, time.Second)
	if err == nil || cl != nil {
		t.Errorf("dial to a remote host in clear text: client %v, error %v", cl, err)
	}
}

func TestClientTokenOverPlaintextLoopback(t *testing.T) {
	f := newFixture(t)
	rec := &recorder{}
	addr := serve(t, nil, rec)
	r := runCLI(t, "sign", "--server", addr, "--token-file", f.tokenFile, f.cardFile)
	if r.Code != exitOK {
		t.Fatalf("exit %d, stderr %s", r.Code, r.Stderr)
	}
	if _, auth, _ := rec.seen(); len(auth) != 1 || auth[0] != "Bearer "+testToken {
		t.Errorf("authorization metadata %q, want one Bearer token", auth)
	}
	// --tls=false wins over CARDSIGN_TLS.
	t.Setenv(tlsEnv, "1")
	if r := runCLI(t, "sign", "--server", addr, "--tls=false", f.cardFile); r.Code != exitOK {
		t.Errorf("--tls=false with %s=1: exit %d, stderr %s", tlsEnv, r.Code, r.Stderr)
	}
}

func TestClientTokenNeverInErrors(t *testing.T) {
	f := newFixture(t)
	plain := serve(t, nil, &recorder{})
	secure := serve(t, serverTLS(t, f.ca, nil), &recorder{})
	unauth := serve(t, serverTLS(t, f.ca, nil), &recorder{refuse: status.Error(codes.Unauthenticated, "authentication required")})
	denied := serve(t, serverTLS(t, f.ca, nil), &recorder{refuse: status.Error(codes.PermissionDenied, "permission denied")})
	spaced := testsupport.WriteFileMode(t, filepath.Join(f.dir, "spaced"), testToken+" "+testToken+"\n", 0o600)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unauthenticated", []string{"--server", unauth, "--ca-file", f.caFile}, "hint: cardsignd refused the credentials: pass --token-file"},
		{"permission denied", []string{"--server", denied, "--ca-file", f.caFile}, "hint: your identity lacks the role this command needs"},
		{"TLS to a plaintext server", []string{"--server", plain, "--ca-file", f.caFile}, "Unavailable"},
		{"plaintext to a TLS server", []string{"--server", secure}, "Unavailable"},
		{"token with a space", []string{"--server", secure, "--ca-file", f.caFile, "--token-file", spaced}, "token file " + spaced + ": the token holds a space"},
		{"missing CA file", []string{"--server", secure, "--ca-file", filepath.Join(f.dir, "nope.pem")}, "--ca-file: open " + filepath.Join(f.dir, "nope.pem")},
		{"CA file without certificates", []string{"--server", secure, "--ca-file", f.tokenFile}, "holds no PEM certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if !strings.Contains(strings.Join(args, " "), "--token-file") {
				t.Setenv(tokenEnv, testToken)
			}
			r := runCLI(t, append(append([]string{"sign"}, args...), f.cardFile)...)
			if r.Code == exitOK || !strings.Contains(r.Stderr, tc.want) {
				t.Errorf("exit %d, stderr %s; want an error with %q", r.Code, r.Stderr, tc.want)
			}
			mustNotLeak(t, r)
		})
	}
	b := bearer{token: testToken, secure: true}
	if s := fmt.Sprintf("%v %+v %#v %s", b, b, b, b); strings.Contains(s, testToken) {
		t.Errorf("formatting a bearer shows the token: %s", s)
	}
}

func TestClientHintsOnlyForRoleRefusals(t *testing.T) {
	f := newFixture(t)
	st, err := status.New(codes.PermissionDenied, "refused by signing policy (audit record 7)").WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "supportedInterfaces[0].url", Description: "host not allowed [policy rule \"team-a\"]"}}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, serverTLS(t, f.ca, nil), &recorder{refuse: st.Err()})
	r := runCLI(t, "sign", "--server", addr, "--ca-file", f.caFile, "--token-file", f.tokenFile, f.cardFile)
	if r.Code != exitFail || !strings.Contains(r.Stderr, "supportedInterfaces[0].url: host not allowed") || strings.Contains(r.Stderr, "hint:") {
		t.Errorf("policy refusal: exit %d, stderr %s; want the violation and no role hint", r.Code, r.Stderr)
	}
}

func TestClientTokenFileChecks(t *testing.T) {
	f := newFixture(t)
	rec := &recorder{}
	addr := serve(t, nil, rec)
	loose := testsupport.WriteFileMode(t, filepath.Join(f.dir, "loose"), testToken, 0o644)
	r := runCLI(t, "sign", "--server", addr, "--token-file", loose, f.cardFile)
	if r.Code != exitOK || !strings.Contains(r.Stderr, "warning: token file "+loose+" is readable by group or others") {
		t.Errorf("group-readable token file: exit %d, stderr %s; want success with a warning", r.Code, r.Stderr)
	}
	mustNotLeak(t, r)
	empty := testsupport.WriteFileMode(t, filepath.Join(f.dir, "empty"), " \n\t\n", 0o600)
	r = runCLI(t, "sign", "--server", addr, "--token-file", empty, f.cardFile)
	if r.Code != exitUsage || !strings.Contains(r.Stderr, "token file "+empty+" is empty") {
		t.Errorf("empty token file: exit %d, stderr %s", r.Code, r.Stderr)
	}
	r = runCLI(t, "sign", "--server", addr, "--token-file", filepath.Join(f.dir, "missing"), f.cardFile)
	if r.Code != exitUsage || !strings.Contains(r.Stderr, "--token-file: open ") {
		t.Errorf("missing token file: exit %d, stderr %s", r.Code, r.Stderr)
	}
	if calls, _, _ := rec.seen(); calls != 1 {
		t.Errorf("server got %d calls, want 1 (the refused token files must not reach it)", calls)
	}
}

func TestClientConnFlagsOnEveryCommand(t *testing.T) {
	clearConnEnv(t)
	for _, args := range [][]string{{"sign"}, {"keys", "list"}, {"audit", "list"}, {"bench"}} {
		r := runCLI(t, append(args, "--help")...)
		for _, fl := range []string{"-server", "-ca-file", "-tls", "-cert-file", "-key-file", "-server-name", "-token-file"} {
			if !strings.Contains(r.Stdout, "  "+fl+" ") && !strings.Contains(r.Stdout, "  "+fl+"\n") {
				t.Errorf("cardsign %s --help lacks %s:\n%s", strings.Join(args, " "), fl, r.Stdout)
			}
		}
	}
	r := runCLI(t, "sign", "--key", "file:k.pem", "--token-file", "t", "-")
	if r.Code != exitUsage || !strings.Contains(r.Stderr, "--token-file and --key exclude each other") {
		t.Errorf("sign --key with --token-file: exit %d, stderr %s", r.Code, r.Stderr)
	}
}

func TestPlaintextOnlyToLoopbackAddresses(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "::1": true, "localhost": true, "LOCALHOST": true,
		"evil.localhost": false, "10.0.0.1": false, "cardsign.internal": false, "": false,
	} {
		if got := plaintextOK(host); got != want {
			t.Errorf("plaintextOK(%q) = %v, want %v", host, got, want)
		}
	}
}
