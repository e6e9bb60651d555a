package daemonconfig

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/access/oidc"
	"github.com/cardsign/cardsign/secretfile"
)

// Verifier returns the auth.oidc verifier, nil when no issuer is configured.
// It fetches nothing: an issuer that is down does not stop the daemon.
func (c OIDCConfig) Verifier(ctx context.Context, log *slog.Logger) (*oidc.Verifier, error) {
	if len(c.Issuers) == 0 {
		return nil, nil
	}
	return oidc.New(ctx, c.config(), oidc.Options{Logger: log})
}

// config is c in the verifier's terms.
func (c OIDCConfig) config() oidc.Config {
	cfg := oidc.Config{ClockSkew: c.ClockSkew, MaxTokenBytes: c.MaxTokenBytes}
	for _, is := range c.Issuers {
		cfg.Issuers = append(cfg.Issuers, oidc.IssuerConfig{Issuer: is.Issuer, Audience: is.Audience, Algorithms: is.Algorithms,
			SubjectClaim: is.SubjectClaim, Claims: is.Claims, CAFile: is.CAFile})
	}
	for _, r := range c.Rules {
		cfg.Rules = append(cfg.Rules, oidc.RoleRule{Issuer: r.Issuer, Claims: r.Claims, Roles: r.Roles})
	}
	return cfg
}

// Authenticator builds the token and client certificate table, and the OIDC
// verifier when auth.oidc names issuers; Validate has checked every entry.
func (c AuthConfig) Authenticator(ctx context.Context, log *slog.Logger) (*access.Authenticator, error) {
	var tokens []access.Token
	for _, t := range c.Tokens {
		h, err := access.ParseTokenHash(t.SHA256)
		if err != nil {
			return nil, fmt.Errorf("auth.tokens %s: %w", t.Name, err)
		}
		tokens = append(tokens, access.Token{Name: t.Name, SHA256: h, Roles: roles(t.Roles)})
	}
	var clients []access.Client
	for _, cl := range c.Clients {
		clients = append(clients, access.Client{Pattern: cl.Identity, Roles: roles(cl.Roles)})
	}
	a := access.New(tokens, clients)
	v, err := c.OIDC.Verifier(ctx, log)
	if err != nil {
		return nil, err
	}
	if v != nil {
		a = a.WithIDTokens(v)
	}
	return a, nil
}

func roles(names []string) []access.Role {
	out := make([]access.Role, 0, len(names))
	for _, n := range names {
		if r, err := access.ParseRole(n); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// ClientCertModes is what each listener asks of client certificates. The gRPC
// listener requires one once tls.client_ca_file is set (client_auth:
// optional lets callers without one through to token authentication). The
// HTTP listener serves verifiers without certificates; a client
// certificate, when offered, can identify a scraper.
func (c TLSConfig) ClientCertModes() (grpcAuth, httpAuth tls.ClientAuthType) {
	if c.ClientCAFile == "" {
		return tls.NoClientCert, tls.NoClientCert
	}
	if c.ClientAuth == "optional" {
		return tls.VerifyClientCertIfGiven, tls.VerifyClientCertIfGiven
	}
	return tls.RequireAndVerifyClientCert, tls.VerifyClientCertIfGiven
}

// CheckBound applies the exposure rule to an address a listener actually
// bound: a name in the config may resolve to a public address, which
// Validate could not see.
func CheckBound(addr net.Addr, tlsOn, authOn bool) error {
	if ap, ok := addr.(*net.TCPAddr); (ok && ap.IP.IsLoopback()) || (tlsOn && authOn) {
		return nil
	}
	return fmt.Errorf("%s is not a loopback address: listening beyond this machine requires TLS (tls.cert_file, tls.key_file) and authentication (auth.tokens or auth.clients)", addr)
}

// PINEnv carries the PKCS#11 user PIN when no pkcs11.pin_file is
// configured: the PIN never comes from the config file, so the file can be
// shared and versioned.
const PINEnv = "CARDSIGN_PKCS11_PIN"

// maxPINFile caps pkcs11.pin_file, as the pkcs11 backend caps a
// pin-source: PINs are short.
const maxPINFile = 1 << 10

// PIN is the PKCS#11 user PIN: pin_file's content without its line end, or
// else the PINEnv environment variable.
func (c PKCS11Config) PIN() (string, error) {
	if c.PINFile == "" {
		return os.Getenv(PINEnv), nil
	}
	data, err := secretfile.ReadFile(c.PINFile, maxPINFile)
	if err != nil {
		return "", fmt.Errorf("pkcs11.pin_file: %w", err)
	}
	return strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r"), nil
}

// Modules are the PKCS#11 modules the daemon may load: allowed_modules, or
// module alone when that list is empty.
func (c PKCS11Config) Modules() []string {
	if len(c.AllowedModules) == 0 && c.Module != "" {
		return []string{c.Module}
	}
	return c.AllowedModules
}
