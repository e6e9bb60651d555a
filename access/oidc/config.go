package oidc

import (
	"crypto/x509"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cardsign/cardsign/glob"
	"github.com/cardsign/cardsign/secretfile"
)

// Defaults.
const (
	// DefaultClockSkew is the leeway for exp, nbf and iat. ID tokens of CI
	// systems live minutes; ten seconds covers clock drift between an NTP-
	// synchronised runner and cardsignd without stretching that much.
	DefaultClockSkew = 10 * time.Second
	// MaxClockSkew bounds ClockSkew: a larger leeway would turn a five-minute
	// token into a much longer-lived credential.
	MaxClockSkew = 5 * time.Minute
	// DefaultMaxTokenBytes caps a token before any parsing. Real ID tokens
	// are 1-3 KiB (GitHub's about 1.5 KiB); 16 KiB leaves room for large
	// Kubernetes tokens without letting a caller make us decode megabytes.
	DefaultMaxTokenBytes = 16 << 10
	// DefaultSubjectClaim names the caller.
	DefaultSubjectClaim = "sub"
)

// DefaultAlgorithms are allowed when an issuer lists none: what GitHub,
// GitLab and Kubernetes (RS256) and most other issuers (ES256) sign with.
var defaultAlgorithms = []string{"RS256", "ES256"}

// asymmetricAlgorithms are the JOSE signature algorithms an issuer may be
// configured with. Symmetric ones (HS*) are absent on purpose: the "secret"
// would be the issuer's public key, which anyone can fetch, so an HS256 token
// "signed" with it would verify (the algorithm-confusion attack). "none" is
// absent for the obvious reason.
var asymmetricAlgorithms = []string{
	"RS256", "RS384", "RS512",
	"PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512",
	"EdDSA",
}

// The roles a RoleRule may grant. They mirror package access's roles, which
// this package must not import (access uses this package).
var knownRoles = []string{"signer", "admin", "auditor", "reader", "approver"}

// IssuerConfig is one trusted issuer.
type IssuerConfig struct {
	// Issuer is the issuer identifier: an https URL, exactly as in the
	// tokens' "iss" and the discovery document's "issuer" (no trailing-slash
	// normalisation: OIDC Discovery demands an exact match).
	Issuer string
	// Audience must be one of the token's "aud" values. Required: without
	// it, a token minted for any other relying party of a shared issuer
	// (every GitHub Actions job can mint one) would be accepted.
	Audience string
	// Algorithms allowed for this issuer's tokens; default RS256 and ES256.
	// Only asymmetric JOSE algorithms: RS256/384/512, PS256/384/512,
	// ES256/384/512, EdDSA.
	Algorithms []string
	// SubjectClaim names the flattened claim (see Token.Claims) whose value,
	// a non-empty JSON string, names the caller; default "sub".
	SubjectClaim string
	// Claims are requirements every token of this issuer must meet: flattened
	// claim name → glob pattern (package glob). For a shared issuer such as
	// GitHub's, this is where the organisation is pinned
	// ({"repository_owner": "acme"}).
	Claims map[string]string
	// CAFile is an optional PEM bundle trusted, instead of the system roots,
	// for this issuer's HTTPS (a private Kubernetes API server's issuer).
	CAFile string
}

// RoleRule grants roles to tokens of one issuer whose claims match.
type RoleRule struct {
	// Issuer is the exact Issuer of a configured IssuerConfig.
	Issuer string
	// Claims: flattened claim name → glob pattern; all must match. At least
	// one is required, so that no rule grants a role to every token of a
	// shared issuer.
	Claims map[string]string
	// Roles granted: "signer", "admin", "auditor", "reader".
	Roles []string
}

// Config is the OIDC part of cardsignd's authentication (auth.oidc).
type Config struct {
	Issuers []IssuerConfig
	Rules   []RoleRule
	// ClockSkew is the leeway for exp, nbf and iat: 0 means
	// DefaultClockSkew (10s); at most MaxClockSkew (5m). Negative means none.
	ClockSkew time.Duration
	// MaxTokenBytes caps a token's length; a longer one is refused before any
	// parsing. 0 means DefaultMaxTokenBytes (16 KiB).
	MaxTokenBytes int
}

// configPath prefixes every Validate message, so that they read like the
// daemon's other configuration errors.
const configPath = "auth.oidc"

// Validate returns every problem in c, each starting with the field's path
// ("auth.oidc.issuers[0].audience: required"). It reads CAFiles, so that a
// missing or unparsable bundle is reported at --check-config rather than at
// the first token.
func (c Config) Validate() []string {
	var probs []string
	add := func(path, format string, args ...any) {
		probs = append(probs, configPath+"."+path+": "+fmt.Sprintf(format, args...))
	}
	if c.ClockSkew > MaxClockSkew {
		add("clock_skew", "%v is more than the maximum %v", c.ClockSkew, MaxClockSkew)
	}
	if c.MaxTokenBytes < 0 {
		add("max_token_bytes", "must not be negative")
	}

	seen := map[string]int{}
	for i, is := range c.Issuers {
		p := fmt.Sprintf("issuers[%d]", i)
		if msg := checkIssuerURL(is.Issuer); msg != "" {
			add(p+".issuer", "%s", msg)
		} else if j, dup := seen[is.Issuer]; dup {
			add(p+".issuer", "%q is also issuers[%d]", is.Issuer, j)
		} else {
			seen[is.Issuer] = i
		}
		if strings.TrimSpace(is.Audience) == "" {
			add(p+".audience", "required (the aud this daemon's tokens are minted for, e.g. the daemon's URL)")
		}
		for j, alg := range is.Algorithms {
			if !slices.Contains(asymmetricAlgorithms, alg) {
				add(fmt.Sprintf("%s.algorithms[%d]", p, j), "%q is not allowed; use one of %s (symmetric algorithms and none are refused)",
					alg, strings.Join(asymmetricAlgorithms, ", "))
			}
		}
		if is.SubjectClaim != "" && strings.TrimSpace(is.SubjectClaim) != is.SubjectClaim {
			add(p+".subject_claim", "%q has surrounding spaces", is.SubjectClaim)
		}
		probs = append(probs, checkClaims(p+".claims", is.Claims)...)
		if is.CAFile != "" {
			if _, err := loadCAFile(is.CAFile); err != nil {
				add(p+".ca_file", "%v", err)
			}
		}
	}

	for i, r := range c.Rules {
		p := fmt.Sprintf("rules[%d]", i)
		if _, ok := seen[r.Issuer]; !ok {
			add(p+".issuer", "%q is not one of auth.oidc.issuers", r.Issuer)
		}
		if len(r.Claims) == 0 {
			add(p+".claims", "required: a rule without claims would grant its roles to every token of the issuer")
		} else if onlyStars(r.Claims) {
			add(p+".claims", `every pattern is "*": the rule would grant its roles to every token of the issuer that has these claims (on a shared issuer such as GitHub's, every repository's); name the repository, project or namespace`)
		}
		probs = append(probs, checkClaims(p+".claims", r.Claims)...)
		if len(r.Roles) == 0 {
			add(p+".roles", "required (signer, admin, auditor, reader or approver)")
		}
		for j, role := range r.Roles {
			if !slices.Contains(knownRoles, role) {
				add(fmt.Sprintf("%s.roles[%d]", p, j), "unknown role %q (signer, admin, auditor, reader or approver)", role)
			}
		}
	}
	return probs
}

// onlyStars reports whether every claim pattern matches anything.
func onlyStars(claims map[string]string) bool {
	for _, pat := range claims {
		if strings.Trim(pat, "*") != "" {
			return false
		}
	}
	return true
}

// checkIssuerURL returns what is wrong with an issuer identifier, or "".
func checkIssuerURL(s string) string {
	if s == "" {
		return "required"
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a URL", s)
	case u.Scheme != "https":
		return fmt.Sprintf("%q must be an https URL: keys fetched over plain HTTP could be replaced on the way", s)
	case u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || strings.ContainsAny(s, "?#"):
		// A bare trailing '?' or '#' parses as empty; it is refused too,
		// since "oidc:ISSUER#SUBJECT" identities rely on no '#' in ISSUER.
		return fmt.Sprintf("%q must be https://HOST[/PATH], with no user, query or fragment", s)
	}
	return ""
}

// checkClaims validates a claim-name → glob map, with path prefixing each
// problem ("auth.oidc.rules[0].claims.repository: …").
func checkClaims(path string, claims map[string]string) []string {
	var probs []string
	for _, name := range slices.Sorted(maps.Keys(claims)) {
		if strings.TrimSpace(name) == "" {
			probs = append(probs, fmt.Sprintf("%s.%s: %q: empty claim name", configPath, path, name))
			continue
		}
		if !glob.Valid(claims[name]) {
			probs = append(probs, fmt.Sprintf("%s.%s.%s: the pattern must be non-empty UTF-8", configPath, path, name))
		}
	}
	return probs
}

// maxCAFile caps an issuer's ca_file: a CA bundle is kilobytes (the whole
// Mozilla bundle ~200 KiB); a wrong path (a device, a log) is refused.
const maxCAFile = 1 << 20

// loadCAFile reads a PEM bundle into a pool, refusing one with no
// certificate (a wrong path to a key file, say).
func loadCAFile(path string) (*x509.CertPool, error) {
	b, err := secretfile.ReadFile(path, maxCAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in the file", path)
	}
	return pool, nil
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	switch {
	case c.ClockSkew == 0:
		c.ClockSkew = DefaultClockSkew
	case c.ClockSkew < 0:
		c.ClockSkew = 0
	}
	if c.MaxTokenBytes == 0 {
		c.MaxTokenBytes = DefaultMaxTokenBytes
	}
	issuers := make([]IssuerConfig, len(c.Issuers))
	for i, is := range c.Issuers {
		if len(is.Algorithms) == 0 {
			is.Algorithms = defaultAlgorithms
		}
		if is.SubjectClaim == "" {
			is.SubjectClaim = DefaultSubjectClaim
		}
		issuers[i] = is
	}
	c.Issuers = issuers
	return c
}
