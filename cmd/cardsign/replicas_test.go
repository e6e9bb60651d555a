package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/internal/testpki"
	"github.com/cardsign/cardsign/internal/testsupport"
	"golang.org/x/net/dns/dnsmessage"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// These tests cover --server with several cardsignd replicas: the list's
// syntax, the service config (round_robin, health checking, retries), TLS
// names per address, a DNS name with several addresses, and real cardsignd
// processes killed with SIGKILL or made unready.

func TestServerListParsing(t *testing.T) {
	good := map[string]string{
		"127.0.0.1:7700":                         "127.0.0.1:7700",
		"[::1]:7700":                             "[::1]:7700",
		"localhost:7700":                         "localhost:7700",
		"cardsign.internal":                      "cardsign.internal:443",
		"[::1]":                                  "[::1]:443",
		" a.example:1 , b.example:2,c.example:3": "a.example:1,b.example:2,c.example:3",
		"127.0.0.1:7700,[::1]:7700,cs_1.internal.:7701": "127.0.0.1:7700,[::1]:7700,cs_1.internal.:7701",
	}
	for in, want := range good {
		got, err := parseServers(in, "--server")
		if err != nil || got.String() != want {
			t.Errorf("parseServers(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]string{
		"a:1,,b":                  `--server "a:1,,b": entry 2 is empty`,
		"a:1,":                    `entry 2 is empty`,
		",a:1":                    `entry 1 is empty`,
		"a:1, ,b:2":               `entry 2 is empty`,
		"a:1,b:x":                 `entry 2 ("b:x"): port "x" is not a number from 1 to 65535`,
		"a:1,b:0":                 `port "0" is not a number`,
		"a:1,b:65536":             `port "65536" is not a number`,
		"a:":                      `port "" is not a number`,
		":7700":                   `no host before the port`,
		"a:1,b:2,a:1":             `entry 3 ("a:1") repeats entry 1`,
		"A.example:1,a.example:1": `repeats entry 1`,
		"::1":                     `an IPv6 address goes in brackets`,
		"::1:7700":                `an IPv6 address goes in brackets`,
		"[cs.internal]:7700":      `brackets go around an IPv6 address`,
		"[127.0.0.1]:7700":        `brackets go around an IPv6 address`,
		"dns:///cs.internal:7700": `not a URL or gRPC target`,
		"unix:/run/cardsign.sock": `not a URL or gRPC target`,
		"cs..internal:7700":       `"cs..internal" is not a host name`,
		"cs internal:7700":        `"cs internal" is not a host name`,
		"a:1;b:2":                 `several addresses are separated by commas`,
	}
	for in, want := range bad {
		if got, err := parseServers(in, "--server"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseServers(%q) = %q, %v; want an error with %q", in, got, err, want)
		}
	}
}

func TestServerListRefusedByEveryCommand(t *testing.T) {
	clearConnEnv(t)
	card := filepath.Join(t.TempDir(), "card.json")
	writeFile(t, card, []byte(benchCard))
	for _, args := range [][]string{{"sign", card}, {"keys", "list"}, {"audit", "list"}, {"bench"}, {"version"}} {
		start := time.Now()
		r := runCLI(t, append(args, "--server", "127.0.0.1:1,,127.0.0.1:2")...)
		if r.Code != exitUsage || !strings.Contains(r.Stderr, `--server "127.0.0.1:1,,127.0.0.1:2": entry 2 is empty: want HOST:PORT`) {
			t.Errorf("cardsign %s: exit %d, stderr %s", args[0], r.Code, r.Stderr)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("cardsign %s: refusing took %s: it must not dial", args[0], d)
		}
	}
	t.Setenv(serverEnv, "127.0.0.1:1,127.0.0.1:x")
	r := runCLI(t, "sign", card)
	if r.Code != exitUsage || !strings.Contains(r.Stderr, `$CARDSIGN_SERVER "127.0.0.1:1,127.0.0.1:x": entry 2 ("127.0.0.1:x"): port "x"`) {
		t.Errorf("bad entry in $%s: exit %d, stderr %s", serverEnv, r.Code, r.Stderr)
	}
	// The real binary says the same.
	r = cardsign(t, t.TempDir(), nil, "sign", "--server", "a:1,,b", card)
	if r.Code != exitUsage || !strings.Contains(r.Stderr, `--server "a:1,,b": entry 2 is empty`) || r.Stdout != "" {
		t.Errorf("cardsign binary: exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
	}
}

func TestServerListPlaintextOnlyToLoopback(t *testing.T) {
	f := newFixture(t)
	t.Setenv(tokenEnv, testToken)
	r := runCLI(t, "sign", "--server", "127.0.0.1:7700,localhost:7701,192.0.2.1:7700", f.cardFile)
	if r.Code != exitUsage || !strings.Contains(r.Stderr, "server 192.0.2.1:7700 is not on this machine: refusing to connect in clear text") {
		t.Errorf("exit %d, stderr %s", r.Code, r.Stderr)
	}
	mustNotLeak(t, r)
}

// TestServerTargets: one IP address is dialed as before (no service
// config); a name goes through gRPC's DNS resolver and a list through a
// per-connection manual resolver, both with the replica service config.
func TestServerTargets(t *testing.T) {
	for _, tc := range []struct {
		in, target string
		replicas   bool
	}{
		{"127.0.0.1:7700", "127.0.0.1:7700", false},
		{"[::1]:7700", "[::1]:7700", false},
		{"localhost:7700", "dns:///localhost:7700", true},
		{"cardsign.internal:7700", "dns:///cardsign.internal:7700", true},
		{"127.0.0.1:7700,127.0.0.1:7701", replicaScheme + ":///127.0.0.1:7700,127.0.0.1:7701", true},
	} {
		list, err := parseServers(tc.in, "--server")
		if err != nil {
			t.Fatal(err)
		}
		target, opts := list.target("")
		if target != tc.target || (len(opts) > 0) != tc.replicas {
			t.Errorf("%s: target %q with %d options; want %q, replica options %v", tc.in, target, len(opts), tc.target, tc.replicas)
		}
		// NewClient parses the service config and the target without
		// connecting: both must be valid.
		conn, err := grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		conn.Close()
	}
}

// TestReplicaServiceConfig: round_robin and health checking, no gRPC
// retry policy (the retrier retries), and retries for UNAVAILABLE on
// exactly the calls that are safe to repeat. Every RPC of the API must be
// classified here, so a new one is a decision.
func TestReplicaServiceConfig(t *testing.T) {
	var sc struct {
		LoadBalancingConfig []map[string]json.RawMessage
		HealthCheckConfig   *struct{ ServiceName *string }
		MethodConfig        []json.RawMessage
	}
	if err := json.Unmarshal([]byte(replicaServiceConfig), &sc); err != nil {
		t.Fatal(err)
	}
	if len(sc.LoadBalancingConfig) != 1 || sc.LoadBalancingConfig[0]["round_robin"] == nil {
		t.Errorf("loadBalancingConfig %v, want round_robin", sc.LoadBalancingConfig)
	}
	if sc.HealthCheckConfig == nil || sc.HealthCheckConfig.ServiceName == nil || *sc.HealthCheckConfig.ServiceName != "" {
		t.Errorf("healthCheckConfig must name the server-wide service \"\": %s", replicaServiceConfig)
	}
	if len(sc.MethodConfig) != 0 {
		t.Errorf("methodConfig %s: a gRPC retry policy beside the retrier would multiply the attempts", sc.MethodConfig)
	}
	if retryAttempts < 3 || retryAttempts > 5 || retryInitialBackoff != 250*time.Millisecond || retryMaxBackoff != 2*time.Second {
		t.Errorf("retry policy: %d attempts, backoff %s to %s; docs/replicas.md says 4 attempts, 0.25-2 s", retryAttempts, retryInitialBackoff, retryMaxBackoff)
	}
	retried := map[string]bool{}
	for _, m := range retriedMethods {
		retried[m] = true
	}
	safe := map[string]bool{
		"/cardsign.v1.SigningService/SignCard":       true, // a retried sign is a new audited signature
		"/cardsign.v1.SigningService/VerifyCard":     true,
		"/cardsign.v1.SigningService/LintCard":       true,
		"/cardsign.v1.KeyService/ListKeys":           true,
		"/cardsign.v1.AuditService/ListAuditRecords": true,
		"/cardsign.v1.ServerService/GetServerInfo":   true,
		"/cardsign.v1.KeyService/CreateKey":          false, // state changes: a retry could do them twice
		"/cardsign.v1.KeyService/ImportKey":          false,
		"/cardsign.v1.KeyService/RotateKey":          false,
		"/cardsign.v1.KeyService/ActivateKey":        false,
		"/cardsign.v1.KeyService/RetireKey":          false,
		"/cardsign.v1.KeyService/RevokeKey":          false,
		// Reads: sign --wait polls through a failover.
		"/cardsign.v1.ApprovalService/ListApprovals": true,
		"/cardsign.v1.ApprovalService/GetApproval":   true,
		// A vote after a lost answer would be refused as a second vote.
		"/cardsign.v1.ApprovalService/Approve": false,
		"/cardsign.v1.ApprovalService/Deny":    false,
	}
	for _, sd := range []grpc.ServiceDesc{pb.SigningService_ServiceDesc, pb.KeyService_ServiceDesc, pb.AuditService_ServiceDesc, pb.ServerService_ServiceDesc, pb.ApprovalService_ServiceDesc} {
		if len(sd.Streams) > 0 {
			t.Errorf("%s has streams: classify them", sd.ServiceName)
		}
		for _, m := range sd.Methods {
			full := "/" + sd.ServiceName + "/" + m.MethodName
			want, known := safe[full]
			if !known {
				t.Errorf("%s is not classified as safe or unsafe to retry", full)
			} else if retried[full] != want {
				t.Errorf("%s: retried %v, want %v", full, retried[full], want)
			}
			delete(retried, full)
		}
	}
	for m := range retried {
		t.Errorf("retry policy names %s, which the API does not have", m)
	}
}

func TestDescribeRetriedCall(t *testing.T) {
	err := gaveUp(4, status.Error(codes.Unavailable, "connection error: refused"))
	if got, want := describe(err), "Unavailable: connection error: refused (after 4 attempts)"; got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
	st := status.New(codes.Unavailable, "connection active but health check failed. status=NOT_SERVING")
	if got := describe(st.Err()); !strings.Contains(got, "hint: cardsignd answered but reports NOT_SERVING") {
		t.Errorf("describe = %q, want the NOT_SERVING hint", got)
	}
}

// serveOn is serve (client_test.go) on a given address.
func serveOn(t *testing.T, addr string, r *recorder) (string, error) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	return serveGRPC(t, lis, func(srv *grpc.Server) { pb.RegisterSigningServiceServer(srv, r) }), nil
}

// signUntil calls SignCard through cl until done says so, failing the test
// on an error or after 30 seconds.
func signUntil(t *testing.T, cl *client, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		ctx, cancel := cl.ctx(t.Context())
		_, err := cl.signing.SignCard(ctx, &pb.SignCardRequest{Card: []byte(`{"name":"test"}`)})
		cancel()
		if err != nil {
			t.Fatalf("SignCard: %s", describe(err))
		}
	}
}

func called(recs ...*recorder) func() bool {
	return func() bool {
		for _, r := range recs {
			if n, _, _ := r.seen(); n == 0 {
				return false
			}
		}
		return true
	}
}

// TestServerListTLSNames: each address of a list is verified against its
// own host unless --server-name names the certificate for all of them.
func TestServerListTLSNames(t *testing.T) {
	f := newFixture(t)
	issue := func(leaf testpki.Leaf) *tls.Config {
		leaf.Server = true
		certPEM, keyPEM := f.ca.Issue(t, leaf)
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	nameOnly := issue(testpki.Leaf{CommonName: "localhost", DNSNames: []string{"localhost"}})
	ipOnly := issue(testpki.Leaf{CommonName: "127.0.0.1", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})

	// Different names per address: localhost:P1 has a certificate for
	// the name only, 127.0.0.1:P2 for the IP only. Both verify.
	r1, r2 := &recorder{}, &recorder{}
	_, p1, _ := net.SplitHostPort(serve(t, nameOnly, r1))
	a2 := serve(t, ipOnly, r2)
	cl, err := dial(env{stderr: io.Discard}, &connFlags{server: "localhost:" + p1 + "," + a2, caFile: f.caFile, tokenFile: f.tokenFile}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	signUntil(t, cl, called(r1, r2))
	cl.close()
	for _, r := range []*recorder{r1, r2} {
		if _, auth, _ := r.seen(); len(auth) != 1 || auth[0] != "Bearer "+testToken {
			t.Errorf("authorization metadata %q, want the bearer token on every replica", auth)
		}
	}

	// Two IP addresses whose certificates name localhost only: refused
	// as they are, accepted with --server-name localhost.
	r3, r4 := &recorder{}, &recorder{}
	list := serve(t, nameOnly, r3) + "," + serve(t, nameOnly, r4)
	r := runCLI(t, "sign", "--server", list, "--ca-file", f.caFile, f.cardFile)
	if r.Code != exitUsage || !strings.Contains(r.Stderr, "x509: cannot validate certificate for 127.0.0.1") ||
		!strings.Contains(r.Stderr, "hint: cardsignd's certificate did not verify") {
		t.Errorf("IP addresses, certificates for localhost: exit %d, stderr %s", r.Code, r.Stderr)
	}
	if n3, _, _ := r3.seen(); n3 > 0 {
		t.Errorf("a server got %d calls through an unverified connection", n3)
	}
	if r := runCLI(t, "sign", "--server", list, "--server-name", "localhost", "--ca-file", f.caFile, f.cardFile); r.Code != exitOK {
		t.Errorf("--server-name localhost: exit %d, stderr %s", r.Code, r.Stderr)
	}
	cl, err = dial(env{stderr: io.Discard}, &connFlags{server: list, serverName: "localhost", caFile: f.caFile}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	signUntil(t, cl, called(r3, r4))
	cl.close()

	// --server-name overrides each address's own name.
	r5 := &recorder{}
	list = a2 + "," + serve(t, ipOnly, r5)
	r = runCLI(t, "sign", "--server", list, "--server-name", "cardsign.example", "--ca-file", f.caFile, f.cardFile)
	if r.Code != exitUsage || !strings.Contains(r.Stderr, "cardsign.example") {
		t.Errorf("--server-name naming no certificate: exit %d, stderr %s", r.Code, r.Stderr)
	}
	if n, _, _ := r5.seen(); n > 0 {
		t.Errorf("a server got %d calls through an unverified connection", n)
	}
}

// TestServerNameResolvingToSeveralAddresses: a DNS name with two A
// records is balanced over both with the replica options, through gRPC's
// DNS resolver (here asking a DNS server of the test's own).
func TestServerNameResolvingToSeveralAddresses(t *testing.T) {
	r1, r2 := &recorder{}, &recorder{}
	var a1, a2 string
	for range 20 { // the same port on 127.0.0.1 and 127.0.0.2
		var err error
		if a1, err = serveOn(t, "127.0.0.1:0", r1); err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(a1)
		if a2, err = serveOn(t, "127.0.0.2:"+port, r2); err == nil {
			break
		}
	}
	if a2 == "" {
		t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
	}
	_, port, _ := net.SplitHostPort(a1)
	dnsAddr := serveDNS(t, "replicas.test.", netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"))
	conn, err := grpc.NewClient("dns://"+dnsAddr+"/replicas.test:"+port,
		append(replicaOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	signUntil(t, &client{conn: conn, signing: pb.NewSigningServiceClient(conn), timeout: 10 * time.Second}, called(r1, r2))
}

// serveDNS answers A queries for name with ips (other questions get no
// answer) on a loopback UDP port, and returns that address.
func serveDNS(t *testing.T, name string, ips ...netip.Addr) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			ours := strings.EqualFold(q.Name.String(), name)
			rcode := dnsmessage.RCodeSuccess
			if !ours {
				rcode = dnsmessage.RCodeNameError
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RCode: rcode})
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			if ours && q.Type == dnsmessage.TypeA {
				for _, ip := range ips {
					b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: ip.As4()})
				}
			}
			msg, err := b.Finish()
			if err == nil {
				pc.WriteTo(msg, from)
			}
		}
	}()
	return pc.LocalAddr().String()
}

// replica is a cardsignd process with its own data directory and key.
type replica struct {
	*daemonProcess
	name string
	kid  string // its active key
}

// daemonProcess is a cardsignd a test started.
type daemonProcess struct {
	cmd        *exec.Cmd
	grpc, http string // where it listens
	log        *testsupport.SyncBuffer
	exited     <-chan struct{}
}

// runDaemon starts bin on free loopback ports with config (YAML, written
// beside dataDir) and dataDir, waits until it logs where it listens, and
// kills it when the test ends (showing its log if the test failed).
func runDaemon(t *testing.T, bin, dataDir, config string) *daemonProcess {
	t.Helper()
	cfg := filepath.Join(filepath.Dir(dataDir), "cardsignd.yaml")
	writeFile(t, cfg, []byte(config))
	cmd := exec.Command(bin, "--config", cfg, "--data-dir", dataDir, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	// Registered before StartDaemon's cleanup, so it runs after the kill.
	var log *testsupport.SyncBuffer
	t.Cleanup(func() {
		if t.Failed() && log != nil {
			t.Logf("cardsignd log (%s):\n%s", dataDir, log.String())
		}
	})
	p := testsupport.StartDaemon(t, cmd, 60*time.Second)
	log = p.Log
	return &daemonProcess{cmd: cmd, grpc: p.GRPC, http: p.HTTP, log: p.Log, exited: p.Exited()}
}

// startReplica starts cardsignd on free loopback ports and waits until it
// says where it listens, then reads its active key.
func startReplica(t *testing.T, bin, name string) *replica {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// No per-caller rate limit: every call of the test comes from one
	// anonymous caller, and cardsign bench sends as fast as it can.
	r := &replica{daemonProcess: runDaemon(t, bin, filepath.Join(dir, "data"), "limits:\n  rate: 0\n"), name: name}
	cl := dialOne(t, r.grpc)
	ctx, cancel := cl.ctx(t.Context())
	defer cancel()
	res, err := cl.keys.ListKeys(ctx, &pb.ListKeysRequest{})
	if err != nil {
		t.Fatalf("cardsignd %s: ListKeys: %s", name, describe(err))
	}
	for _, k := range res.GetKeys() {
		if k.GetState() == "active" {
			r.kid = k.GetKid()
		}
	}
	if r.kid == "" {
		t.Fatalf("cardsignd %s has no active key: %v", name, res.GetKeys())
	}
	return r
}

// dialOne connects to one daemon, closed at the end of the test.
func dialOne(t *testing.T, addr string) *client {
	t.Helper()
	cl, err := dial(env{stderr: io.Discard}, &connFlags{server: addr}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.close)
	return cl
}

// kill sends SIGKILL and waits for the process to go.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("cardsignd %s still running 30s after SIGKILL", r.name)
	}
}

// signRequests is the daemon's count of SignCard calls that reached it,
// whatever their outcome.
func (r *replica) signRequests(t *testing.T) float64 {
	t.Helper()
	resp, err := http.Get("http://" + r.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	total := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "cardsign_sign_requests_total{") || strings.HasPrefix(line, "cardsign_sign_requests_total ") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			total += v
		}
	}
	return total
}

// signedKID signs the sample card through cl and returns the kid.
func signedKID(cl *client) (string, error) {
	ctx, cancel := cl.ctx(context.Background())
	defer cancel()
	res, err := cl.signing.SignCard(ctx, &pb.SignCardRequest{Card: []byte(benchCard)})
	if err != nil {
		return "", err
	}
	if len(res.GetSignatures()) == 0 {
		return "", fmt.Errorf("no signature in the response")
	}
	return res.GetSignatures()[0].GetKid(), nil
}

var cliKID = regexp.MustCompile(`signed with kid (\S+) `)

// cliSign runs the cardsign binary's sign through --server list and returns
// the kid it reports.
func cliSign(t *testing.T, list, card string) string {
	t.Helper()
	r := cardsign(t, t.TempDir(), nil, "sign", "--server", list, card)
	m := cliKID.FindStringSubmatch(r.Stderr)
	if r.Code != exitOK || m == nil || !strings.Contains(r.Stdout, `"signatures"`) {
		t.Fatalf("cardsign sign --server %s: exit %d\nstdout %s\nstderr %s", list, r.Code, r.Stdout, r.Stderr)
	}
	return m[1]
}

// TestReplicas runs three real cardsignd processes (separate authorities,
// each with its own SQLite data directory and key, so a signature's kid
// tells which one signed) and signs through --server A,B,C.
func TestReplicas(t *testing.T) {
	clearConnEnv(t)
	bin := daemonBin
	a, b, c := startReplica(t, bin, "A"), startReplica(t, bin, "B"), startReplica(t, bin, "C")
	reps := []*replica{a, b, c}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range reps {
				t.Logf("cardsignd %s (%s, kid %s) log:\n%s", r.name, r.grpc, r.kid, r.log.String())
			}
		}
	})
	byKID := map[string]string{a.kid: "A", b.kid: "B", c.kid: "C"}
	list := a.grpc + "," + b.grpc + "," + c.grpc
	card := filepath.Join(t.TempDir(), "card.json")
	writeFile(t, card, []byte(benchCard))

	// One client for the whole test, as a long-running caller would hold.
	cl, err := dial(env{stderr: io.Discard}, &connFlags{server: list}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()

	ok := t.Run("balances over every replica", func(t *testing.T) {
		seen := map[string]int{}
		deadline := time.Now().Add(60 * time.Second)
		for calls := 0; len(seen) < 3; calls++ {
			if time.Now().After(deadline) || calls > 300 {
				t.Fatalf("after %d calls, signatures came from %v only", calls, seen)
			}
			kid, err := signedKID(cl)
			if err != nil {
				t.Fatalf("SignCard through %s: %s", list, describe(err))
			}
			name, ok := byKID[kid]
			if !ok {
				t.Fatalf("signature by kid %s, which no replica has", kid)
			}
			seen[name]++
		}
		// With all three ready, round_robin takes them in turn: 4 each
		// (at least 3 each should gRPC rebuild its picker, which starts
		// at a random replica, once on the way).
		seen = map[string]int{}
		for range 12 {
			kid, err := signedKID(cl)
			if err != nil {
				t.Fatalf("SignCard: %s", describe(err))
			}
			seen[byKID[kid]]++
		}
		if seen["A"] < 3 || seen["B"] < 3 || seen["C"] < 3 {
			t.Errorf("12 sequential signs with three ready replicas: %v, want 4 each", seen)
		}
		if kid := cliSign(t, list, card); byKID[kid] == "" {
			t.Errorf("cardsign sign: kid %s of no replica", kid)
		}

		// cardsign bench: no errors, and more than one replica signed.
		before := []float64{a.signRequests(t), b.signRequests(t), c.signRequests(t)}
		r := cardsign(t, t.TempDir(), nil, "bench", "--server", list, "--concurrency", "4", "--duration", "2s")
		if r.Code != exitOK || !strings.Contains(r.Stdout, " 0 errors") {
			t.Fatalf("cardsign bench: exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
		}
		busy := 0
		for i, rep := range reps {
			if rep.signRequests(t) > before[i] {
				busy++
			}
		}
		if busy < 2 {
			t.Errorf("cardsign bench --server %s reached %d replica(s)\n%s", list, busy, r.Stdout)
		}
	})
	if !ok {
		return
	}

	ok = t.Run("kill -9 of a replica under load fails over", func(t *testing.T) {
		type outcome struct {
			kid       string
			err       error
			afterKill bool // the call started once B was gone
		}
		var (
			mu      sync.Mutex
			results []outcome
			killed  bool
		)
		stopLoad := testsupport.Hammer(t, 4, func() bool {
			mu.Lock()
			after := killed
			mu.Unlock()
			kid, err := signedKID(cl)
			mu.Lock()
			results = append(results, outcome{kid, err, after})
			mu.Unlock()
			return true
		})
		defer stopLoad()
		// waitFor polls the results until cond holds.
		waitFor := func(what string, cond func([]outcome) bool) {
			t.Helper()
			deadline := time.Now().Add(60 * time.Second)
			for {
				mu.Lock()
				done := cond(results)
				mu.Unlock()
				if done {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: not within 60s", what)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		waitFor("load on every replica", func(rs []outcome) bool {
			n := map[string]bool{}
			for _, r := range rs {
				n[byKID[r.kid]] = true
			}
			return n["A"] && n["B"] && n["C"]
		})
		b.kill(t)
		mu.Lock()
		killed = true
		mu.Unlock()
		waitFor("40 signatures after the kill", func(rs []outcome) bool {
			n := 0
			for _, r := range rs {
				if r.afterKill && r.err == nil {
					n++
				}
			}
			return n >= 40
		})
		stopLoad()
		after, failed := map[string]int{}, 0
		for _, r := range results {
			if r.err != nil {
				if failed++; failed <= 5 {
					t.Errorf("a SignCard failed (the client must fail over without the caller retrying): %s", describe(r.err))
				}
				continue
			}
			if r.afterKill {
				after[byKID[r.kid]]++
			}
		}
		if after["B"] > 0 || after["A"] == 0 || after["C"] == 0 {
			t.Errorf("signatures after B was killed: %v; want A and C only", after)
		}
		if failed > 0 {
			t.Errorf("%d of %d calls failed", failed, len(results))
		}
		t.Logf("%d signatures, after the kill: %v", len(results), after)
		// New processes get through too, whichever address gRPC tries first.
		for range 3 {
			if kid := cliSign(t, list, card); byKID[kid] != "A" && byKID[kid] != "C" {
				t.Errorf("cardsign sign after B was killed: kid %s (%s)", kid, byKID[kid])
			}
		}
	})
	if !ok {
		return
	}

	ok = t.Run("a replica that is NOT_SERVING is avoided", func(t *testing.T) {
		// Revoking C's only key stops its signing: it reports
		// NOT_SERVING on the health service.
		one := dialOne(t, c.grpc)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if _, err := one.keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Kid: c.kid, Reason: "test: make C unready", Force: true}); err != nil {
			t.Fatalf("RevokeKey on C: %s", describe(err))
		}
		health := healthpb.NewHealthClient(one.conn)
		deadline := time.Now().Add(30 * time.Second)
		for {
			res, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Fatalf("health check of C: %v", err)
			}
			if res.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("C still %s 30s after its only key was revoked", res.GetStatus())
			}
			time.Sleep(20 * time.Millisecond)
		}
		reached := c.signRequests(t)

		fresh, err := dial(env{stderr: io.Discard}, &connFlags{server: list}, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.close()
		for i := range 12 {
			kid, err := signedKID(fresh)
			if err != nil {
				t.Fatalf("sign %d with B dead and C not serving: %s", i, describe(err))
			}
			if byKID[kid] != "A" {
				t.Fatalf("sign %d: kid %s (%s), want A's", i, kid, byKID[kid])
			}
		}
		for range 3 {
			if kid := cliSign(t, list, card); byKID[kid] != "A" {
				t.Errorf("cardsign sign with B dead and C not serving: kid %s (%s)", kid, byKID[kid])
			}
		}
		if n := c.signRequests(t); n != reached {
			t.Errorf("C got %v SignCard calls while NOT_SERVING", n-reached)
		}

		// C alone: through its name the client health-checks it and
		// says so; through its IP address it is dialed as one daemon,
		// which gives its own reason.
		_, port, _ := net.SplitHostPort(c.grpc)
		r := cardsign(t, t.TempDir(), nil, "sign", "--server", "localhost:"+port, card)
		if r.Code != exitUsage || !strings.Contains(r.Stderr, "health check failed") || !strings.Contains(r.Stderr, "hint: cardsignd answered but reports NOT_SERVING") {
			t.Errorf("sign through localhost:%s (NOT_SERVING): exit %d, stderr %s", port, r.Code, r.Stderr)
		}
		r = cardsign(t, t.TempDir(), nil, "sign", "--server", c.grpc, card)
		if r.Code != exitFail || !strings.Contains(r.Stderr, "FailedPrecondition") || !strings.Contains(r.Stderr, "no active signing key") {
			t.Errorf("sign through %s (no active key): exit %d, stderr %s", c.grpc, r.Code, r.Stderr)
		}
	})
	if !ok {
		return
	}

	t.Run("no replica ready fails fast", func(t *testing.T) {
		a.kill(t)
		start := time.Now()
		r := cardsign(t, t.TempDir(), nil, "sign", "--server", list, card)
		if r.Code != exitUsage || !strings.Contains(r.Stderr, "Unavailable: ") || !strings.Contains(r.Stderr, fmt.Sprintf("(after %d attempts)", retryAttempts)) {
			t.Errorf("exit %d, stderr %s; want Unavailable after %d attempts", r.Code, r.Stderr, retryAttempts)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("failing took %s: with no replica ready a call must not wait for one", d)
		}
		if _, err := signedKID(cl); err == nil {
			t.Error("the long-lived client signed with no replica ready")
		} else if status.Code(err) != codes.Unavailable {
			t.Errorf("long-lived client: %s, want Unavailable", describe(err))
		}
	})
}

// unavailable is a replica whose SignCard answers UNAVAILABLE (its store
// restarting), after sending response headers when headerFirst is set, as
// cardsignd did before #24 with its request id.
type unavailable struct {
	pb.UnimplementedSigningServiceServer
	headerFirst bool

	mu    sync.Mutex
	calls int
}

func (u *unavailable) SignCard(ctx context.Context, _ *pb.SignCardRequest) (*pb.SignCardResponse, error) {
	u.mu.Lock()
	u.calls++
	u.mu.Unlock()
	if u.headerFirst {
		if err := grpc.SendHeader(ctx, metadata.Pairs("x-request-id", "r1")); err != nil {
			return nil, err
		}
	}
	return nil, status.Error(codes.Unavailable, "store unavailable: database restarting\x1b[2J")
}

func (u *unavailable) seen() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls
}

func serveUnavailable(t *testing.T, u *unavailable) string {
	t.Helper()
	return serveGRPC(t, listenLoopback(t), func(srv *grpc.Server) { pb.RegisterSigningServiceServer(srv, u) })
}

var retryNote = regexp.MustCompile(`(?m)^cardsign sign: SignCard succeeded on attempt (\d+) of at most 4 \(attempt \d+: Unavailable: store unavailable: database restarting\\x1b\[2J\)$`)

// TestRetryOnAnotherReplica: with one replica answering UNAVAILABLE and
// another healthy, every SignCard through --server BAD,GOOD succeeds, and
// the client says on standard error how many attempts a call took. The
// failing replica sends headers before its error in one case (a cardsignd
// from before #24): gRPC's own retry policy gave up on those after one
// attempt, which is how 12 of 500 signs failed during a database restart.
func TestRetryOnAnotherReplica(t *testing.T) {
	clearConnEnv(t)
	for _, tc := range []struct {
		name        string
		headerFirst bool
	}{
		{"trailers-only error", false},
		{"error after response headers", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := &unavailable{headerFirst: tc.headerFirst}
			good := &recorder{}
			list := serveUnavailable(t, bad) + "," + serve(t, nil, good)
			notes := &testsupport.SyncBuffer{}
			cl, err := dial(env{stderr: notes}, &connFlags{cmd: "sign", server: list}, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.close()
			sign := func() error {
				ctx, cancel := cl.ctx(t.Context())
				defer cancel()
				_, err := cl.signing.SignCard(ctx, &pb.SignCardRequest{Card: []byte(`{"name":"test"}`)})
				return err
			}

			// Until both replicas are connected the balancer may offer
			// the failing one alone: those calls may fail.
			deadline := time.Now().Add(30 * time.Second)
			for n, _, _ := good.seen(); n == 0 || bad.seen() == 0; n, _, _ = good.seen() {
				if time.Now().After(deadline) {
					t.Fatalf("after 30s: %d calls reached the healthy replica, %d the failing one", n, bad.seen())
				}
				_ = sign()
			}

			badBefore, goodBefore := bad.seen(), func() int { n, _, _ := good.seen(); return n }()
			notesBefore := len(retryNote.FindAllStringSubmatch(notes.String(), -1))
			const calls = 10
			for i := range calls {
				if err := sign(); err != nil {
					t.Fatalf("call %d: %s", i, describe(err))
				}
			}
			failed := bad.seen() - badBefore
			goodN, _, _ := good.seen()
			if goodN-goodBefore != calls {
				t.Errorf("the healthy replica answered %d calls, want %d", goodN-goodBefore, calls)
			}
			// round_robin alternates between the two: about every other
			// call meets the failing replica first.
			if failed < calls/2-1 {
				t.Errorf("%d of %d calls reached the failing replica: not balanced", failed, calls)
			}
			// Each call that met it says so: one line per call, counting
			// its attempts.
			extra := 0
			lines := retryNote.FindAllStringSubmatch(notes.String(), -1)[notesBefore:]
			for _, m := range lines {
				n, _ := strconv.Atoi(m[1])
				extra += n - 1
			}
			if len(lines) == 0 || extra != failed {
				t.Errorf("%d failed attempts, but the client reported %d in %d notes:\n%s", failed, extra, len(lines), notes.String())
			}
		})
	}

	t.Run("cardsign sign", func(t *testing.T) {
		f := newFixture(t)
		bad := &unavailable{headerFirst: true}
		list := serveUnavailable(t, bad) + "," + serve(t, nil, &recorder{})
		// A new process's first call goes to either replica, at random:
		// run it until one meets the failing replica first.
		for i := 0; ; i++ {
			if i == 60 {
				t.Fatal("60 runs of cardsign sign and none met the failing replica first")
			}
			before := bad.seen()
			r := runCLI(t, "sign", "--server", list, f.cardFile)
			if r.Code != exitOK {
				// Only when the failing replica was the one connected
				// for every attempt.
				if !strings.Contains(r.Stderr, "(after 4 attempts)") || bad.seen()-before != retryAttempts {
					t.Fatalf("exit %d, stderr %s", r.Code, r.Stderr)
				}
				continue
			}
			if bad.seen() == before {
				if strings.Contains(r.Stderr, "attempt") {
					t.Fatalf("a call with one attempt reports attempts: %s", r.Stderr)
				}
				continue
			}
			if m := retryNote.FindStringSubmatch(r.Stderr); m == nil || m[1] != strconv.Itoa(bad.seen()-before+1) {
				t.Fatalf("cardsign sign met the failing replica %d times; stderr %s", bad.seen()-before, r.Stderr)
			}
			return
		}
	})
}
