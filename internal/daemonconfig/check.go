package daemonconfig

import (
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/glob"
	"github.com/cardsign/cardsign/limits"
	"github.com/cardsign/cardsign/tlsreload"
)

// Problem is one thing wrong with a configuration: the dotted path of the
// field (keys.backend, auth.tokens[1].sha256) and what is wrong with it.
type Problem struct {
	Path    string
	Message string
	line    int // set when the problem came from the YAML decoder
}

// position is a line and column in the config file.
type position struct{ line, col int }

// Error lists every problem of a configuration, each located in its
// file when the field was set there.
type Error struct {
	File      string
	Problems  []Problem
	positions map[string]position
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = e.locate(p)
	}
	return "invalid configuration:\n  " + strings.Join(lines, "\n  ")
}

// locate renders a problem as FILE:LINE:COL: path: message, using the
// nearest enclosing field that appears in the file; a problem with a field
// the file does not set (a default, a flag) has no location.
func (e *Error) locate(p Problem) string {
	msg := p.Message
	if p.Path != "" {
		msg = p.Path + ": " + msg
	}
	if e.File == "" {
		return msg
	}
	if p.line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, p.line, msg)
	}
	for path := p.Path; path != ""; path = parentPath(path) {
		if pos, ok := e.positions[path]; ok {
			return fmt.Sprintf("%s:%d:%d: %s", e.File, pos.line, pos.col, msg)
		}
	}
	return msg + " (not set in " + e.File + ")"
}

// parentPath drops the last element of a dotted path: a.b[2].c → a.b[2] →
// a.b → a → "".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// positions maps every field path in a YAML document to where it is.
func positions(root *yaml.Node) map[string]position {
	out := map[string]position{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				out[p] = position{k.Line, k.Column}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				out[p] = position{c.Line, c.Column}
				walk(c, p)
			}
		}
	}
	walk(root, "")
	return out
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
var yamlUnknown = regexp.MustCompile(`^field (\S+) not found in type \S+$`)

// yamlProblem turns a decoder message ("line 3: field bogus not found in
// type daemonconfig.SigningConfig") into a located problem.
func yamlProblem(msg string) Problem {
	p := Problem{Message: msg}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		p.line, _ = strconv.Atoi(m[1])
		p.Message = m[2]
		if u := yamlUnknown.FindStringSubmatch(m[2]); u != nil {
			p.Message = fmt.Sprintf("unknown field %q (a misspelt setting would silently keep its default)", u[1])
		}
	}
	return p
}

type reporter func(path, format string, args ...any)

func validateTLS(c *Config, bad reporter) {
	t := c.TLS
	if !t.Enabled() {
		if t.ClientCAFile != "" {
			bad("tls.client_ca_file", "client certificates need TLS: set tls.cert_file and tls.key_file too")
		}
		if t.ClientAuth != "" {
			bad("tls.client_auth", "needs tls.cert_file, tls.key_file and tls.client_ca_file")
		}
		return
	}
	usable := true
	for _, f := range []struct{ path, file string }{{"tls.cert_file", t.CertFile}, {"tls.key_file", t.KeyFile}, {"tls.client_ca_file", t.ClientCAFile}} {
		if f.file == "" {
			if f.path != "tls.client_ca_file" {
				bad(f.path, "TLS needs both tls.cert_file and tls.key_file")
				usable = false
			}
			continue
		}
		if _, err := os.Stat(f.file); err != nil {
			bad(f.path, "%v", err)
			usable = false
		}
	}
	if usable {
		// Load the material as the daemon will: a key that does not match
		// its certificate, an expired certificate or an empty CA bundle is
		// found here, not at start.
		quiet := slog.New(slog.DiscardHandler)
		if _, err := tlsreload.New(tlsreload.Config{CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFile: t.ClientCAFile, Logger: quiet}); err != nil {
			bad("tls", "%v", err)
		}
	}
	switch t.ClientAuth {
	case "", "require", "optional":
		if t.ClientAuth != "" && t.ClientCAFile == "" {
			bad("tls.client_auth", "needs tls.client_ca_file, the CA bundle client certificates are verified against")
		}
	default:
		bad("tls.client_auth", "%q is not require or optional", t.ClientAuth)
	}
	if t.ReloadInterval < time.Second {
		bad("tls.reload_interval", "%s is shorter than a second", t.ReloadInterval)
	}
}

var tokenName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func validateRoles(bad reporter, path string, roles []string) {
	if len(roles) == 0 {
		bad(path, "needs at least one role (signer, admin, auditor, reader)")
	}
	seen := map[string]bool{}
	for i, r := range roles {
		if _, err := access.ParseRole(r); err != nil {
			bad(fmt.Sprintf("%s[%d]", path, i), "%v", err)
		}
		if seen[r] {
			bad(fmt.Sprintf("%s[%d]", path, i), "role %q listed twice", r)
		}
		seen[r] = true
	}
}

func validateAuth(c *Config, bad reporter) {
	names := map[string]bool{}
	hashes := map[string]int{}
	for i, t := range c.Auth.Tokens {
		p := fmt.Sprintf("auth.tokens[%d]", i)
		switch {
		case !tokenName.MatchString(t.Name):
			bad(p+".name", "%q must be 1–64 of A-Z a-z 0-9 . _ -", t.Name)
		case names[t.Name]:
			bad(p+".name", "%q names two tokens", t.Name)
		}
		names[t.Name] = true
		if _, err := access.ParseTokenHash(t.SHA256); err != nil {
			bad(p+".sha256", "%v", err)
		} else if j, dup := hashes[strings.ToLower(t.SHA256)]; dup {
			bad(p+".sha256", "the same token as auth.tokens[%d]: one token, one name", j)
		} else {
			hashes[strings.ToLower(t.SHA256)] = i
		}
		validateRoles(bad, p+".roles", t.Roles)
	}
	for i, cl := range c.Auth.Clients {
		p := fmt.Sprintf("auth.clients[%d]", i)
		if !glob.Valid(cl.Identity) {
			bad(p+".identity", "must be a certificate identity or glob pattern, e.g. spiffe://example.org/ci/*")
		}
		validateRoles(bad, p+".roles", cl.Roles)
	}
	if len(c.Auth.Clients) > 0 && c.TLS.ClientCAFile == "" {
		bad("auth.clients", "client certificate identities need tls.client_ca_file to verify certificates against")
	}
	if len(c.Auth.OIDC.Issuers) > 0 || len(c.Auth.OIDC.Rules) > 0 {
		for _, p := range c.Auth.OIDC.config().Validate() {
			path, msg, ok := strings.Cut(p, ": ")
			if !ok {
				path, msg = "auth.oidc", p
			}
			bad(path, "%s", msg)
		}
	}
}

func validateLimits(c *Config, bad reporter) {
	l := c.Limits
	if l.Rate < 0 {
		bad("limits.rate", "must not be negative (0 means unlimited)")
	}
	if l.Rate > 0 && l.Burst < 1 {
		bad("limits.burst", "%d must be at least 1 when limits.rate is set", l.Burst)
	}
	schemes := make([]string, 0, len(l.BackendConcurrency))
	for s := range l.BackendConcurrency {
		schemes = append(schemes, s)
	}
	sort.Strings(schemes)
	for _, s := range schemes {
		switch s {
		case "default", "file", "pkcs11", "gcpkms", "awskms", "azurekv", "hashivault":
		default:
			bad("limits.backend_concurrency."+s, "%q is not a backend (default, file, pkcs11, gcpkms, awskms, azurekv, hashivault)", s)
		}
		if n := l.BackendConcurrency[s]; n < 1 || n > 10000 {
			bad("limits.backend_concurrency."+s, "%d must be between 1 and 10000", n)
		}
	}
	if l.RequestTimeout <= 0 {
		bad("limits.request_timeout", "must be positive")
	}
	if l.MaxMessageBytes != 0 && l.MaxMessageBytes < c.Signing.MaxCardBytes {
		bad("limits.max_message_bytes", "%d is smaller than signing.max_card_bytes (%d): the largest legal card could not be sent", l.MaxMessageBytes, c.Signing.MaxCardBytes)
	}
	if l.MaxMessageBytes < 0 || l.MaxMessageBytes > 64<<20 {
		bad("limits.max_message_bytes", "%d must be between 0 (max_card_bytes + 64 KiB) and 64 MiB", l.MaxMessageBytes)
	}
	validateConnLimits(c, bad)
}

// validateConnLimits checks the connection limits; 0 for max_connections
// and max_connections_per_ip means derived from the open file limit.
func validateConnLimits(c *Config, bad reporter) {
	l := c.Limits
	if l.MaxConnections < 0 || l.MaxConnections > maxConnectionsCeiling {
		bad("limits.max_connections", "%d must be between 0 (derived from the open file limit) and %d", l.MaxConnections, maxConnectionsCeiling)
	}
	if l.MaxConnectionsPerIP < 0 {
		bad("limits.max_connections_per_ip", "%d must not be negative (0 derives it from max_connections)", l.MaxConnectionsPerIP)
	} else if l.MaxConnections > 0 && l.MaxConnectionsPerIP > l.MaxConnections {
		bad("limits.max_connections_per_ip", "%d is more than limits.max_connections (%d): lower it or raise max_connections", l.MaxConnectionsPerIP, l.MaxConnections)
	}
	if l.MaxStreamsPerConnection < 1 || l.MaxStreamsPerConnection > 10000 {
		bad("limits.max_streams_per_connection", "%d must be between 1 and 10000 (default %d)", l.MaxStreamsPerConnection, limits.DefaultMaxStreamsPerConnection)
	}
	// The floor leaves room for a bearer token, a request id and gRPC's
	// own headers.
	if l.MaxHeaderBytes < 4<<10 || l.MaxHeaderBytes > 1<<20 {
		bad("limits.max_header_bytes", "%d must be between 4096 and 1048576 (default %d)", l.MaxHeaderBytes, limits.DefaultMaxHeaderBytes)
	}
	if l.HandshakeTimeout < 100*time.Millisecond || l.HandshakeTimeout > 5*time.Minute {
		bad("limits.handshake_timeout", "%s must be between 100ms and 5m (default %s)", l.HandshakeTimeout, limits.DefaultHandshakeTimeout)
	}
	if l.IdleTimeout < time.Second || l.IdleTimeout > 24*time.Hour {
		bad("limits.idle_timeout", "%s must be between 1s and 24h (default %s)", l.IdleTimeout, limits.DefaultIdleTimeout)
	}
	if l.MaxUnauthenticatedStreams < 1 || l.MaxUnauthenticatedStreams > maxConnectionsCeiling {
		bad("limits.max_unauthenticated_streams", "%d must be between 1 and %d (default %d)", l.MaxUnauthenticatedStreams, maxConnectionsCeiling, limits.DefaultMaxUnauthenticatedStreams)
	}
	if l.MaxUnauthenticatedStreamsPerIP < 1 {
		bad("limits.max_unauthenticated_streams_per_ip", "%d must be at least 1 (default %d)", l.MaxUnauthenticatedStreamsPerIP, limits.DefaultMaxUnauthenticatedStreamsPerIP)
	} else if l.MaxUnauthenticatedStreamsPerIP > l.MaxUnauthenticatedStreams {
		bad("limits.max_unauthenticated_streams_per_ip", "%d is more than limits.max_unauthenticated_streams (%d): lower it or raise max_unauthenticated_streams", l.MaxUnauthenticatedStreamsPerIP, l.MaxUnauthenticatedStreams)
	}
	if l.RefusalLogBurst < 1 || l.RefusalLogBurst > 10000 {
		bad("limits.refusal_log_burst", "%d must be between 1 and 10000 (default %d)", l.RefusalLogBurst, limits.DefaultRefusalLogBurst)
	}
	if l.RefusalLogInterval < time.Second || l.RefusalLogInterval > time.Hour {
		bad("limits.refusal_log_interval", "%s must be between 1s and 1h (default %s)", l.RefusalLogInterval, limits.DefaultRefusalLogInterval)
	}
}

// validatePolicyCallers catches policy rules that can never apply: an
// identity pattern cardsignd never produces, a token that does not exist,
// roles that cannot sign. Such a rule fails closed, but silently.
func validatePolicyCallers(c *Config, bad reporter) {
	tokens := map[string]bool{}
	for _, t := range c.Auth.Tokens {
		tokens[t.Name] = true
	}
	for i, r := range c.Policy.Rules {
		for j, id := range r.Identities {
			p := fmt.Sprintf("policy.rules[%d].identities[%d]", i, j)
			name, isToken := strings.CutPrefix(id, "token:")
			switch {
			case id == "anonymous" || id == "*" || strings.HasPrefix(id, "cert:") || strings.HasPrefix(id, "oidc:"):
			case isToken:
				if !strings.ContainsAny(name, "*?") && !tokens[name] {
					bad(p, "no token named %q in auth.tokens", name)
				}
			default:
				bad(p, "%q names no caller: identities are token:NAME (auth.tokens), cert:IDENTITY (a client certificate) or oidc:ISSUER#SUBJECT (an identity token, auth.oidc), e.g. %q", id, "cert:"+id)
			}
		}
		if len(r.Claims) > 0 && len(c.Auth.OIDC.Issuers) == 0 {
			bad(fmt.Sprintf("policy.rules[%d].claims", i), "only identity tokens carry claims, and auth.oidc names no issuer: the rule refuses every caller")
		}
		if _, pinned := r.Claims["iss"]; len(r.Claims) > 0 && len(c.Auth.OIDC.Issuers) > 1 && !pinned {
			// Claim names are shared across platforms (ref, sha,
			// environment): without iss, a token of another issuer meets
			// the rule.
			bad(fmt.Sprintf("policy.rules[%d].claims", i), "auth.oidc names %d issuers and this rule's claims do not name one: add iss: ISSUER, or tokens of every issuer can meet them", len(c.Auth.OIDC.Issuers))
		}
		if len(r.Identities) == 0 && len(r.Roles) > 0 && !slices.Contains(r.Roles, string(access.RoleSigner)) {
			bad(fmt.Sprintf("policy.rules[%d].roles", i), "only callers with the signer role may sign: a rule for %v alone never applies", r.Roles)
		}
	}
}
