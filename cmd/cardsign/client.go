package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
)

// The environment variables that stand in for the connection flags.
const (
	serverEnv   = "CARDSIGN_SERVER"
	caFileEnv   = "CARDSIGN_CA_FILE"
	tlsEnv      = "CARDSIGN_TLS"
	certFileEnv = "CARDSIGN_CERT_FILE"
	keyFileEnv  = "CARDSIGN_KEY_FILE"
	tokenEnv    = "CARDSIGN_TOKEN"
)

// connUsage is the connection flags in a command's usage line.
const connUsage = "[--server ADDR[,ADDR...]] [--ca-file FILE | --tls] [--cert-file FILE --key-file FILE] [--server-name NAME] [--token-file FILE | --id-token FILE|- | --id-token-env NAME] [--id-token-audience AUD]"

// maxTokenFile caps what is read of a token file: a token is one word.
const maxTokenFile = 16 << 10

// client is a connection to cardsignd.
type client struct {
	conn    *grpc.ClientConn
	signing pb.SigningServiceClient
	keys    pb.KeyServiceClient
	audit   pb.AuditServiceClient
	agents  pb.AgentServiceClient
	// approvals: the approvals desk (approvals, sign --wait).
	approvals pb.ApprovalServiceClient
	timeout   time.Duration
}

// connFlags are the flags of every command that talks to cardsignd. Empty
// values fall back to the environment when dialing.
type connFlags struct {
	cmd        string // the flag set's name, for warnings
	server     string
	caFile     string
	certFile   string
	keyFile    string
	serverName string
	tokenFile  string
	tls        optBool
	idt        idTokenFlags
}

// addConnFlags registers the connection flags on fs.
func addConnFlags(fs *flag.FlagSet) *connFlags {
	cf := &connFlags{cmd: fs.Name()}
	fs.StringVar(&cf.server, "server", "", "cardsignd address HOST:PORT, or the addresses of several replicas separated by commas "+
		"(e.g. cs1.internal:7700,cs2.internal:7700,cs3.internal:7700), balanced over those ready and failed over; "+
		"a name that resolves to several addresses is balanced the same way (default $"+serverEnv+")")
	fs.StringVar(&cf.caFile, "ca-file", "", "PEM CA certificates to verify cardsignd's certificate with (audit verify's https fetches trust them too, besides the system roots); turns TLS on (default $"+caFileEnv+")")
	fs.Var(&cf.tls, "tls", "connect with TLS; without --ca-file, cardsignd's certificate is verified against the system roots (default on when $"+tlsEnv+" is 1 or true)")
	fs.StringVar(&cf.certFile, "cert-file", "", "PEM client certificate for mutual TLS, with --key-file; turns TLS on (default $"+certFileEnv+")")
	fs.StringVar(&cf.keyFile, "key-file", "", "PEM private key of --cert-file (default $"+keyFileEnv+")")
	fs.StringVar(&cf.serverName, "server-name", "", "name to verify cardsignd's certificate against, for every address of --server (default the host of each address)")
	fs.StringVar(&cf.tokenFile, "token-file", "", "file holding a bearer token to send on every call (default: the token in $"+tokenEnv+")")
	fs.StringVar(&cf.idt.file, "id-token", "", "file holding an OIDC identity token (a pipeline's), or - for standard input; sent instead of a bearer token "+
		"(default: $"+idTokenEnv+", GitHub Actions' token endpoint, $"+idTokenFileEnv+", or "+defaultProjectedToken+", when no bearer token is given)")
	fs.StringVar(&cf.idt.envName, "id-token-env", "", "name of the variable holding the OIDC identity token (GitLab CI: the name under id_tokens:)")
	fs.StringVar(&cf.idt.audience, "id-token-audience", "", "audience to request from GitHub Actions: the one cardsignd's auth.oidc issuer expects, e.g. its URL; giving it (or $"+idTokenAudienceEnv+") turns the request on")
	return cf
}

// connFlagsGiven returns the names of the connection flags given on the
// command line, in the order of fs.Visit.
func connFlagsGiven(fs *flag.FlagSet) []string {
	var given []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "server", "ca-file", "tls", "cert-file", "key-file", "server-name", "token-file", "id-token", "id-token-env", "id-token-audience":
			given = append(given, f.Name)
		}
	})
	return given
}

// optBool is a boolean flag that remembers whether it was given, so that
// --tls=false overrides $CARDSIGN_TLS.
type optBool struct{ value, set bool }

func (b *optBool) String() string   { return strconv.FormatBool(b != nil && b.value) }
func (b *optBool) IsBoolFlag() bool { return true }

func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	b.value, b.set = v, true
	return nil
}

func serverAddr(flagValue string) string { return orEnv(flagValue, serverEnv) }

func orEnv(flagValue, name string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv(name)
}

// servers reads --server, or $CARDSIGN_SERVER when it is not given.
func (cf *connFlags) servers() (servers, error) {
	value, source := cf.server, "--server"
	if value == "" {
		value, source = os.Getenv(serverEnv), "$"+serverEnv
	}
	if strings.TrimSpace(value) == "" {
		return nil, errors.New("no server: pass --server HOST:PORT (or HOST:PORT,HOST:PORT,... for several replicas) or set " + serverEnv)
	}
	return parseServers(value, source)
}

// dial connects to cardsignd: with TLS when any TLS flag is set, in clear
// text only to servers on this machine. A bearer token, if any, goes with
// every call and never in clear text over the network. With several
// replicas (servers.go), calls are balanced over the ready ones.
func dial(e env, cf *connFlags, timeout time.Duration) (*client, error) {
	list, err := cf.servers()
	if err != nil {
		return nil, err
	}
	creds, err := cf.transport(list)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(32 << 20))}
	tok, err := cf.token(e)
	if err != nil {
		return nil, err
	}
	if tok != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: tok, secure: !list.local()}))
	}
	target, more := list.target(cf.serverName)
	if list.replicated() {
		more = append(more, grpc.WithChainUnaryInterceptor(newRetrier(retryNotes(e.stderr, cf.cmd)).unary))
	}
	conn, err := grpc.NewClient(target, append(opts, more...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", list, err)
	}
	return &client{conn: conn, signing: pb.NewSigningServiceClient(conn), keys: pb.NewKeyServiceClient(conn),
		audit: pb.NewAuditServiceClient(conn), agents: pb.NewAgentServiceClient(conn),
		approvals: pb.NewApprovalServiceClient(conn), timeout: timeout}, nil
}

// tlsWanted reports whether a TLS flag or variable is set.
func (cf *connFlags) tlsWanted() (bool, error) {
	if cf.tls.set {
		return cf.tls.value, nil
	}
	switch v := strings.ToLower(strings.TrimSpace(os.Getenv(tlsEnv))); v {
	case "1", "true":
		return true, nil
	case "", "0", "false":
		return false, nil
	default:
		return false, fmt.Errorf("$%s is %q: want 1, true, 0 or false", tlsEnv, v)
	}
}

// transport returns TLS credentials, or plaintext ones for loopback
// servers when no TLS flag is set.
func (cf *connFlags) transport(list servers) (credentials.TransportCredentials, error) {
	caFile, caSource := caFileOf(cf.caFile)
	certFile, keyFile := orEnv(cf.certFile, certFileEnv), orEnv(cf.keyFile, keyFileEnv)
	on, err := cf.tlsWanted()
	if err != nil {
		return nil, err
	}
	if !on && caFile == "" && certFile == "" && keyFile == "" {
		if cf.serverName != "" {
			return nil, errors.New("--server-name applies to TLS only: pass --ca-file FILE or --tls")
		}
		for _, s := range list {
			if !plaintextOK(s.host) {
				return nil, fmt.Errorf("server %s is not on this machine: refusing to connect in clear text; pass --ca-file FILE (or --tls to trust the system roots) to connect with TLS", s.addr)
			}
		}
		return insecure.NewCredentials(), nil
	}
	// One name for the whole connection: --server-name, or the host of a
	// single address. The addresses of a list carry their own names
	// (servers.target), which the TLS handshake uses.
	name := cf.serverName
	if name == "" && len(list) == 1 {
		name = list[0].host
	}
	cfg, err := tlsConfig(caFile, caSource, certFile, keyFile, name)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// tlsConfig builds the client's TLS configuration: the system roots unless
// caFile is given (named caSource in errors), and a client certificate when
// certFile and keyFile are.
func tlsConfig(caFile, caSource, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pool := x509.NewCertPool()
		if err := addCAFile(pool, caFile, caSource); err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--cert-file and --key-file go together: pass both for a client certificate, or neither")
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate (--cert-file %s, --key-file %s): %v", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// token returns the credential sent as the bearer on every call: the token of
// --token-file, an identity token named by --id-token or --id-token-env, the
// token in $CARDSIGN_TOKEN, or else an identity token the environment offers
// (idTokenFlags.idToken); "" when there is none. Errors name where the
// token came from, never the token.
func (cf *connFlags) token(e env) (string, error) {
	explicitID := cf.idt.file != "" || cf.idt.envName != ""
	switch {
	case cf.tokenFile != "" && explicitID:
		return "", errors.New("--token-file and --id-token/--id-token-env both name a credential: give one")
	case cf.tokenFile != "":
		return readTokenFile(e, cf.cmd, cf.tokenFile)
	case explicitID:
		c, err := cf.idt.idToken(context.Background(), e)
		return c.token, err
	}
	if tok := strings.TrimSpace(os.Getenv(tokenEnv)); tok != "" {
		if err := checkToken(tok); err != nil {
			return "", fmt.Errorf("$%s: %v", tokenEnv, err)
		}
		return tok, nil
	}
	if orEnv(cf.certFile, certFileEnv) != "" {
		// A client certificate is this caller's credential: an identity
		// token lying around (a job that may mint them for other uses)
		// would be sent instead, and the daemon prefers the bearer.
		return "", nil
	}
	c, err := cf.idt.idToken(context.Background(), e)
	return c.token, err
}

// readTokenFile reads a token file, warning when others may read it too.
func readTokenFile(e env, cmd, name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if len(data) > maxTokenFile {
		return "", fmt.Errorf("token file %s is larger than %d KiB: not a bearer token", name, maxTokenFile>>10)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", name)
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("token file %s: %v", name, err)
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o044 != 0 && runtime.GOOS != "windows" {
		fmt.Fprintf(e.stderr, "cardsign %s: warning: token file %s is readable by group or others (mode %04o): chmod 600 %s\n",
			cmd, name, fi.Mode().Perm(), name)
	}
	return tok, nil
}

// checkToken accepts one word of printable ASCII, which is what an
// authorization header can carry.
func checkToken(tok string) error {
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return errors.New("the token holds a space, control or non-ASCII character: want one word of printable ASCII")
		}
	}
	return nil
}

// bearer sends a token as "authorization: Bearer TOKEN" on every call.
type bearer struct {
	token  string
	secure bool // the server is not on this machine: send the token over TLS only
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

// String and GoString keep the token out of anything that prints a bearer.
func (b bearer) String() string   { return "bearer token (redacted)" }
func (b bearer) GoString() string { return b.String() }

func (c *client) close() { c.conn.Close() }

func (c *client) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, c.timeout)
}

// describe renders a gRPC error with its field violations, one per line,
// and a hint when the client can tell what to change.
func describe(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	var b strings.Builder
	// A status message and its violations quote the card or the key
	// that caused them: escaped, so they cannot write to the terminal.
	fmt.Fprintf(&b, "%s: %s", st.Code(), escapeText(st.Message()))
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fmt.Fprintf(&b, "\n  %s: %s", escapeText(v.GetField()), escapeText(v.GetDescription()))
			}
		}
	}
	if h := hint(st); h != "" {
		fmt.Fprintf(&b, "\n  hint: %s", h)
	}
	return b.String()
}

// hint says what the user can change after a refusal. The daemon gives no
// detail on authentication failures on purpose; the client knows which
// flags exist.
func hint(st *status.Status) string {
	switch st.Code() {
	case codes.Unauthenticated:
		if strings.HasPrefix(st.Message(), "identity token refused") {
			return "cardsignd refused the OIDC identity token for the reason above: its issuer must be in cardsignd's auth.oidc.issuers " +
				"with the audience the token was minted for (--id-token-audience for GitHub Actions), and the token must be fresh"
		}
		return "cardsignd refused the credentials: pass --token-file FILE or set " + tokenEnv + ", an OIDC identity token with --id-token " +
			"(from an issuer in cardsignd's auth.oidc.issuers), or a client certificate with --cert-file/--key-file"
	case codes.PermissionDenied:
		if hasFieldViolations(st) {
			return "" // a signing policy's refusal, which explains itself
		}
		if strings.Contains(st.Message(), "no rule matched") {
			return "cardsignd verified the identity token, but no auth.oidc.rules entry grants it a role: " +
				"ask its operator for a rule whose claims match this pipeline (repository, project, namespace, ...)"
		}
		if strings.HasPrefix(st.Message(), "approval apr_") {
			return "" // a vote refused by the approval's rules, which the message names
		}
		return "your identity lacks the role this command needs: signer for sign and bench, admin for keys (auditor may list them), auditor for audit, approver for approvals approve and deny"
	case codes.Unavailable:
		return connHint(st.Message())
	}
	return ""
}

func hasFieldViolations(st *status.Status) bool {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return true
		}
	}
	return false
}

// connHint explains the TLS failures that surface as UNAVAILABLE.
func connHint(msg string) string {
	switch {
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "failed to verify certificate"):
		return "cardsignd's certificate did not verify: pass --ca-file with the CA that issued it (--tls alone trusts the system roots), or --server-name with a name the certificate holds"
	case strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate"):
		return "cardsignd wants a client certificate it trusts: pass --cert-file and --key-file"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the server did not answer with TLS: check that cardsignd serves TLS on this address"
	case strings.Contains(msg, "server preface"):
		return "the server may expect TLS: pass --ca-file FILE or --tls"
	case strings.Contains(msg, "health check failed"):
		return "cardsignd answered but reports NOT_SERVING (not ready to sign) at every address of --server that could be reached: see each replica's /readyz and log"
	case strings.Contains(msg, "no such host") || strings.Contains(msg, "produced zero addresses"):
		return "a name in --server does not resolve: check it, or pass the replicas' addresses as HOST:PORT,HOST:PORT"
	case strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset"):
		// With TLS 1.3 a server's refusal of the client certificate
		// often shows only as a closed connection.
		return "the server closed the connection: if cardsignd requires a client certificate, pass --cert-file and --key-file"
	}
	return ""
}

// plaintextOK reports whether cards and tokens may go to host in clear
// text: a loopback IP or "localhost" itself. Other *.localhost names are
// loopback by RFC 6761 but resolved by whatever DNS the machine uses, so a
// secret is not sent to them on faith.
func plaintextOK(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
