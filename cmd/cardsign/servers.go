package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	_ "google.golang.org/grpc/health" // client-side health checking (healthCheckConfig)
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
)

// One cardsignd or several replicas behind --server.
//
//   - One IP address (127.0.0.1:7700, [::1]:7700): dialed as before,
//     with gRPC's defaults (pick_first, no retries, no health
//     checking), so that a refusal by that one daemon reaches the user
//     as the daemon said it.
//   - One name (cardsign.internal:7700): gRPC's DNS resolver
//     (dns:///NAME:PORT) with the replica service config below and the
//     retrier (retry.go), so a name that resolves to several addresses is
//     balanced over them, and a name with one address behaves as one
//     daemon does.
//   - A comma-separated list: a resolver/manual resolver private to the
//     connection (grpc.WithResolvers: no global registration), one
//     endpoint per entry, with the same service config and retrier.

// replicaScheme is the scheme of the per-connection manual resolver that
// holds a list of addresses. It is registered with grpc.WithResolvers on
// that one connection only, never globally.
const replicaScheme = "cardsign-servers"

// defaultPort is gRPC's own default for a target without a port.
const defaultPort = "443"

// retriedMethods are the calls retried on UNAVAILABLE (retry.go), on
// another replica when there is one: reads, and SignCard, whose retry
// after a lost response is a second audited signature of the same card,
// which is what signing twice would be anyway. The key administration
// calls that change state (create, import, rotate, activate, retire,
// revoke) are not: a retry after a lost response could do the change
// twice. gRPC still retries any call transparently when it never left the
// client.
var retriedMethods = []string{
	pb.SigningService_SignCard_FullMethodName,
	pb.SigningService_VerifyCard_FullMethodName,
	pb.SigningService_LintCard_FullMethodName,
	pb.KeyService_ListKeys_FullMethodName,
	pb.AuditService_ListAuditRecords_FullMethodName,
	pb.ServerService_GetServerInfo_FullMethodName,
	pb.ApprovalService_ListApprovals_FullMethodName,
	pb.ApprovalService_GetApproval_FullMethodName,
}

// Retry policy of retriedMethods: at most retryAttempts calls in all, the
// pause before the n-th retry min(0.25s·2^(n-1), 2s) ±20%.
const (
	retryAttempts       = 4
	retryInitialBackoff = 250 * time.Millisecond
	retryMaxBackoff     = 2 * time.Second
)

// replicaServiceConfig is the service config of a connection that may
// reach several replicas: round_robin over the ready ones, and client-side
// health checking of each (the standard grpc.health.v1 service with the
// server-wide name ""; cardsignd reports NOT_SERVING while its readiness
// check fails and while it shuts down). Retries are the retrier's, not a
// retry policy's (retry.go says why).
const replicaServiceConfig = `{"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}}`

// replicaOptions are the dial options of a connection that may reach
// several replicas.
func replicaOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultServiceConfig(replicaServiceConfig),
		// The policy is the client's: a service config in DNS TXT
		// records is not fetched.
		grpc.WithDisableServiceConfig(),
	}
}

// server is one entry of --server.
type server struct {
	addr string // HOST:PORT, IPv6 in brackets
	host string // without brackets
	ip   bool   // host is an IP address
}

// servers is what --server or $CARDSIGN_SERVER names.
type servers []server

func (s servers) String() string {
	addrs := make([]string, len(s))
	for i, e := range s {
		addrs[i] = e.addr
	}
	return strings.Join(addrs, ",")
}

// parseServers reads a comma-separated list of HOST:PORT (PORT defaults
// to 443, as in gRPC). Errors name source (the flag or the variable) and
// the bad entry.
func parseServers(value, source string) (servers, error) {
	parts := strings.Split(value, ",")
	var out servers
	seen := map[string]int{}
	for i, p := range parts {
		p = strings.TrimSpace(p)
		where := fmt.Sprintf("%s %q", source, value)
		if len(parts) > 1 {
			where += fmt.Sprintf(": entry %d", i+1)
		}
		if p == "" {
			return nil, fmt.Errorf("%s is empty: want HOST:PORT, or several separated by commas (HOST:PORT,HOST:PORT)", where)
		}
		s, err := parseServer(p)
		if err != nil {
			if len(parts) > 1 {
				where += fmt.Sprintf(" (%q)", p)
			}
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		key := strings.ToLower(s.addr)
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s (%q) repeats entry %d: list each replica once", where, p, j)
		}
		seen[key] = i + 1
		out = append(out, s)
	}
	return out, nil
}

// parseServer checks one HOST:PORT.
func parseServer(entry string) (server, error) {
	if strings.Contains(entry, "://") || strings.HasPrefix(entry, "unix:") {
		return server{}, errors.New("want HOST:PORT, not a URL or gRPC target: cardsign picks the resolver itself")
	}
	host, port := entry, defaultPort
	if strings.HasPrefix(entry, "[") && strings.HasSuffix(entry, "]") {
		host = entry[1 : len(entry)-1] // [IPv6] without a port
	} else if strings.HasPrefix(entry, "[") || strings.Count(entry, ":") == 1 {
		h, p, err := net.SplitHostPort(entry)
		if err != nil {
			return server{}, fmt.Errorf("want HOST:PORT: %v", unwrapAddrError(err))
		}
		host, port = h, p
	} else if strings.Contains(entry, ":") {
		return server{}, errors.New("want HOST:PORT: an IPv6 address goes in brackets ([ADDRESS]:PORT), and several addresses are separated by commas")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
		return server{}, fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	if host == "" {
		return server{}, errors.New("no host before the port: want HOST:PORT")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if strings.HasPrefix(entry, "[") != a.Is6() {
			return server{}, errors.New("brackets go around an IPv6 address, and only there: [ADDRESS]:PORT")
		}
		return server{addr: net.JoinHostPort(host, port), host: host, ip: true}, nil
	}
	if strings.HasPrefix(entry, "[") {
		return server{}, errors.New("brackets go around an IPv6 address, and only there: [ADDRESS]:PORT")
	}
	if err := checkHostName(host); err != nil {
		return server{}, err
	}
	return server{addr: net.JoinHostPort(host, port), host: host}, nil
}

func unwrapAddrError(err error) string {
	var ae *net.AddrError
	if errors.As(err, &ae) {
		return ae.Err
	}
	return err.Error()
}

// checkHostName accepts a DNS name: dot-separated labels of letters,
// digits, '-' and '_', none empty (but a final dot), 253 bytes at most.
func checkHostName(host string) error {
	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > 253 {
		return fmt.Errorf("%q is not a host name or IP address", host)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%q is not a host name or IP address", host)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q is not a host name or IP address", host)
			}
		}
	}
	return nil
}

// target returns the gRPC target of s and the dial options that go with
// it. serverName, when set (--server-name), is the name every address's
// certificate is verified against; otherwise each address of a list is
// verified against its own host.
func (s servers) target(serverName string) (string, []grpc.DialOption) {
	if !s.replicated() {
		return s[0].addr, nil
	}
	if len(s) == 1 {
		return "dns:///" + s[0].addr, replicaOptions()
	}
	state := resolver.State{}
	for _, e := range s {
		// The address's ServerName is both the TLS name (its host; the
		// port is dropped) and the :authority of calls to it.
		name := e.addr
		if serverName != "" {
			name = serverName
		}
		a := resolver.Address{Addr: e.addr, ServerName: name}
		state.Addresses = append(state.Addresses, a)
		state.Endpoints = append(state.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{a}})
	}
	r := manual.NewBuilderWithScheme(replicaScheme)
	r.InitialState(state)
	return replicaScheme + ":///" + s.String(), append(replicaOptions(), grpc.WithResolvers(r))
}

// replicated reports whether s may name several replicas (a list, or a
// name that may resolve to several addresses): the calls are then
// balanced, health-checked and retried. One IP address is one daemon.
func (s servers) replicated() bool { return len(s) > 1 || !s[0].ip }

// local reports whether every server is on this machine.
func (s servers) local() bool {
	for _, e := range s {
		if !plaintextOK(e.host) {
			return false
		}
	}
	return true
}
