// Package access decides who is calling cardsignd and what they may do:
// bearer tokens stored as SHA-256 hashes, client certificate identities, and
// the roles each carries.
//
// An identity is namespaced by how it was proven ("token:release-a",
// "cert:spiffe://example.org/ci/team-a") so that a certificate whose name
// happens to equal a token's name never stands for that token in a signing
// policy or an audit record.
package access

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cardsign/cardsign/access/oidc"
	"github.com/cardsign/cardsign/glob"
)

// Role is a set of operations.
type Role string

// The roles. They are independent: an admin token that should also sign
// lists both.
const (
	RoleSigner  Role = "signer"  // SignCard, VerifyCard, LintCard
	RoleAdmin   Role = "admin"   // key operations
	RoleAuditor Role = "auditor" // audit listing, key listing, /metrics
	RoleReader  Role = "reader"  // reading private cards of the registry
	// RoleApprover approves or denies signatures a signing policy rule
	// held for approval (cardsign approvals).
	RoleApprover Role = "approver"
)

// Roles lists every role, for validation and documentation.
var roles = []Role{RoleSigner, RoleAdmin, RoleAuditor, RoleReader, RoleApprover}

// ParseRole accepts one of the role names.
func ParseRole(s string) (Role, error) {
	if slices.Contains(roles, Role(s)) {
		return Role(s), nil
	}
	return "", fmt.Errorf("unknown role %q (signer, admin, auditor, reader or approver)", s)
}

// Method says how an identity was proven.
type Method string

const (
	MethodNone  Method = "none"  // no authentication configured (loopback only)
	MethodToken Method = "token" // a bearer token
	MethodCert  Method = "cert"  // a verified client certificate
	MethodOIDC  Method = "oidc"  // an OIDC identity token from a trusted issuer
)

// Identity is an authenticated caller.
type Identity struct {
	// Name is namespaced by Method: "token:NAME", "cert:IDENTITY", or
	// "anonymous" when authentication is off.
	Name   string
	Method Method
	Roles  []Role
	// Principal is the configured entry that admitted the caller: the
	// token ("token:NAME") or the auth.clients pattern
	// ("cert:spiffe://example.org/ci/*"). Unlike Name it comes from the
	// configuration, so metrics labelled with it cannot be made to grow
	// without bound by a CA issuing many identities.
	Principal string
	// Claims are an OIDC caller's token claims, flattened (nested objects as
	// dotted names), for signing policy rules over claims; nil otherwise.
	Claims map[string]string
	// Provenance is what an OIDC caller's token says about the pipeline run
	// (issuer, subject, repository, ref, sha, run id, ...), recorded with
	// each signature; nil otherwise.
	Provenance map[string]string
}

// Has reports whether the identity holds role r.
func (id Identity) Has(r Role) bool { return slices.Contains(id.Roles, r) }

// RoleNames returns the roles as strings.
func (id Identity) RoleNames() []string {
	out := make([]string, len(id.Roles))
	for i, r := range id.Roles {
		out[i] = string(r)
	}
	return out
}

// Anonymous is every caller when no authentication is configured: the
// embedded default, on loopback only, where whoever can reach the port
// already runs as a local user.
var Anonymous = Identity{Name: "anonymous", Method: MethodNone, Roles: roles, Principal: "anonymous"}

// Token is a configured bearer token: its SHA-256, never the token itself.
type Token struct {
	Name   string
	SHA256 [sha256.Size]byte
	Roles  []Role
}

// ParseTokenHash decodes the 64 hex digits of a token's SHA-256.
func ParseTokenHash(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return h, errors.New("must be the 64 hex digits of the token's SHA-256 (cardsign token hash)")
	}
	copy(h[:], b)
	return h, nil
}

// Client grants roles to client certificate identities matching Pattern (a
// glob: "spiffe://example.org/ci/*").
type Client struct {
	Pattern string
	Roles   []Role
}

// ErrUnauthenticated is every authentication failure. It carries no detail
// on purpose: which part was wrong (no token, unknown token, malformed
// header, unknown certificate) would help only someone guessing.
var ErrUnauthenticated = errors.New("authentication required")

// Authenticator turns presented credentials into an Identity.
type Authenticator struct {
	tokens   []Token
	clients  []Client
	idTokens *oidc.Verifier
}

// New returns an authenticator over the configured tokens and certificate
// identities. With neither, authentication is off and every caller is
// Anonymous.
func New(tokens []Token, clients []Client) *Authenticator {
	return &Authenticator{tokens: tokens, clients: clients}
}

// WithIDTokens returns a copy of a that also accepts OIDC identity tokens
// verified by v (release pipelines: GitHub Actions, GitLab CI, Kubernetes).
func (a *Authenticator) WithIDTokens(v *oidc.Verifier) *Authenticator {
	b := *a
	b.idTokens = v
	return &b
}

// PrefetchIDTokenKeys fetches every identity-token issuer's keys now (a
// daemon starting), so that a wrong issuer URL or CA file shows in its log
// before the first pipeline runs. Verification fetches them anyway when
// needed; nil without identity tokens.
func (a *Authenticator) PrefetchIDTokenKeys(ctx context.Context) error {
	if a.idTokens == nil {
		return nil
	}
	return a.idTokens.Prefetch(ctx)
}

// Enabled reports whether callers must authenticate.
func (a *Authenticator) Enabled() bool {
	return len(a.tokens) > 0 || len(a.clients) > 0 || a.idTokens != nil
}

// IDTokenError is an identity token the verifier refused. It matches
// ErrUnauthenticated; Reason is the verifier's stable label (oidc.Reason*),
// which the caller may be told: it says which check failed, never anything
// the token holds.
type IDTokenError struct {
	Reason string
	Err    error
}

func (e *IDTokenError) Error() string { return "identity token refused: " + e.Reason }
func (e *IDTokenError) Unwrap() error { return e.Err }

// Is makes an IDTokenError match ErrUnauthenticated.
func (e *IDTokenError) Is(target error) bool { return target == ErrUnauthenticated }

// Credentials is what a caller presented.
type Credentials struct {
	// Authorization is the raw "authorization" header or metadata value,
	// "" when absent.
	Authorization string
	// CertIdentity is the identity of a client certificate the TLS layer
	// verified against the client CA bundle (CertificateIdentity), "" when
	// none was presented.
	CertIdentity string
}

// Authenticate returns the caller's identity. A bearer token, when sent,
// names the caller (a pipeline on a machine whose certificate many jobs
// share): a configured token, or else an OIDC identity token from a trusted
// issuer; otherwise a verified client certificate does. A static token's
// failure reveals nothing; a refused identity token is an *IDTokenError
// naming the check that failed.
func (a *Authenticator) Authenticate(ctx context.Context, c Credentials) (Identity, error) {
	if !a.Enabled() {
		return Anonymous, nil
	}
	if c.Authorization != "" {
		tok, ok := bearer(c.Authorization)
		if !ok {
			return Identity{}, ErrUnauthenticated
		}
		if t, ok := a.lookup(tok); ok {
			return Identity{Name: "token:" + t.Name, Method: MethodToken, Roles: t.Roles, Principal: "token:" + t.Name}, nil
		}
		if a.idTokens != nil && oidc.LooksLikeJWT(tok) {
			return a.idToken(ctx, tok)
		}
		return Identity{}, ErrUnauthenticated
	}
	if c.CertIdentity != "" {
		var granted []Role
		matched := false
		principal := ""
		for _, cl := range a.clients {
			if glob.Match(cl.Pattern, c.CertIdentity) {
				if !matched {
					principal = "cert:" + cl.Pattern
				}
				matched = true
				for _, r := range cl.Roles {
					if !slices.Contains(granted, r) {
						granted = append(granted, r)
					}
				}
			}
		}
		if matched {
			return Identity{Name: "cert:" + c.CertIdentity, Method: MethodCert, Roles: granted, Principal: principal}, nil
		}
	}
	return Identity{}, ErrUnauthenticated
}

// idToken verifies an OIDC identity token. The identity is
// "oidc:ISSUER#SUBJECT" (an issuer URL has no fragment, so the '#' cannot be
// forged into it); the principal, a metrics label, is "oidc:ISSUER", which
// the configuration bounds.
func (a *Authenticator) idToken(ctx context.Context, raw string) (Identity, error) {
	t, err := a.idTokens.Verify(ctx, raw)
	if err != nil {
		reason := "invalid"
		if oe, ok := errors.AsType[*oidc.Error](err); ok {
			reason = oe.Reason
		}
		return Identity{}, &IDTokenError{Reason: reason, Err: err}
	}
	var granted []Role
	for _, r := range t.Roles {
		if role, err := ParseRole(r); err == nil && !slices.Contains(granted, role) {
			granted = append(granted, role)
		}
	}
	return Identity{
		Name: "oidc:" + t.Issuer + "#" + t.Subject, Method: MethodOIDC, Roles: granted, Principal: "oidc:" + t.Issuer,
		Claims: t.Claims, Provenance: t.Provenance(),
	}, nil
}

// lookup compares the presented token's hash with every configured hash in
// constant time and without stopping at a match, so the time taken says
// nothing about which entry, if any, matched.
func (a *Authenticator) lookup(tok string) (Token, bool) {
	h := sha256.Sum256([]byte(tok))
	found := -1
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(h[:], a.tokens[i].SHA256[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return a.tokens[found], true
}

// bearer extracts the token of an "Authorization: Bearer TOKEN" value. The
// scheme is case-insensitive (RFC 9110 §11.1).
func bearer(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
