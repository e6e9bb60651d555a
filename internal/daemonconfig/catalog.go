package daemonconfig

import (
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/registry/catalog"
	"github.com/cardsign/cardsign/strictjson"
)

// CatalogConfig is the organisation's AI Catalog and did:web DID: off unless
// Domain is set. Validate applies the defaults (the daemon hands the result
// to the authority as registry/catalog.Settings).
type CatalogConfig struct {
	// The organisation's root domain: the AI Catalog's signer
	// did:web:DOMAIN, whose DID document is served at
	// /.well-known/did.json, and the publisher of every entry's
	// urn:air:DOMAIN:… identifier. Lowercase ASCII labels (IDNA A-labels
	// for other scripts), at least two, no scheme, port, path, IP address
	// or trailing dot. Setting it turns the catalog on; --check-config and
	// the start refuse it when no key can sign ES256.
	Domain string `yaml:"domain"`
	// The urn:air namespace of the agents' identifiers
	// (urn:air:DOMAIN:NAMESPACE:AGENT_ID): 1–64 bytes of segments of
	// lowercase ASCII letters, digits and hyphens (not at a segment's start
	// or end), separated by single colons, e.g. finance:agents.
	Namespace string `yaml:"namespace"`
	// The catalog's host.displayName: at most 200 characters, no control
	// or format characters, no white space at either end.
	DisplayName string `yaml:"display_name"`
	// Each entry's publisher.displayName (the rule of
	// catalog.display_name).
	PublisherName string `yaml:"publisher_name"`
	// Where consumers reach the registry's card URLs: an entry's url is
	// BASE_URL/agents/{id}/agent-card.json. An https URL with a host, no
	// user information, query or fragment; a path is kept
	// (https://example.com/cardsign), a trailing slash dropped.
	BaseURL string `yaml:"base_url"`
	// true: entries carry each card as data instead of a url.
	Inline bool `yaml:"inline"`
}

// Enabled reports whether a catalog is published.
func (c CatalogConfig) Enabled() bool { return c.Domain != "" }

// Caps of the catalog's names: a namespace is part of every identifier; a
// display name is shown to people, not parsed.
const (
	maxNamespaceBytes   = 64
	maxDisplayNameRunes = 200
)

// validateCatalog checks the catalog section; nothing when it is off but
// for fields set without catalog.domain (they would silently do nothing).
func validateCatalog(c *Config, bad reporter) {
	cat := c.Catalog
	if !cat.Enabled() {
		if cat != (CatalogConfig{}) {
			bad("catalog.domain", "is not set, so the catalog is off and the other catalog fields do nothing: set it to the organisation's root domain (e.g. example.com), or remove the catalog section")
		}
		return
	}
	if err := aicatalog.CheckDomain(cat.Domain); err != nil {
		bad("catalog.domain", "%q is not a root did:web domain: %v (lowercase ASCII, no scheme, port, path or trailing dot, e.g. example.com)", cat.Domain, err)
	}
	if cat.Namespace != "" {
		if err := CheckNamespace(cat.Namespace); err != nil {
			bad("catalog.namespace", "%q: %v", cat.Namespace, err)
		}
	}
	for _, f := range []struct{ path, v string }{{"catalog.display_name", cat.DisplayName}, {"catalog.publisher_name", cat.PublisherName}} {
		if err := checkDisplayName(f.v); err != nil {
			bad(f.path, "%q: %v", f.v, err)
		}
	}
	if cat.BaseURL != "" {
		if err := checkBaseURL(cat.BaseURL); err != nil {
			bad("catalog.base_url", "%q: %v", cat.BaseURL, err)
		}
	}
}

// withDefaults is c with the defaults registry/catalog.Settings documents
// applied (Validate calls it on a valid config), so that what the daemon
// reports is what it publishes.
func (c CatalogConfig) withDefaults() CatalogConfig {
	if !c.Enabled() {
		return c
	}
	s := c.Settings().WithDefaults()
	c.Namespace, c.DisplayName, c.PublisherName, c.BaseURL = s.Namespace, s.DisplayName, s.PublisherName, s.BaseURL
	return c
}

// Settings are the authority's catalog settings of the section.
func (c CatalogConfig) Settings() catalog.Settings {
	return catalog.Settings{Domain: c.Domain, Namespace: c.Namespace, DisplayName: c.DisplayName,
		PublisherName: c.PublisherName, BaseURL: c.BaseURL, Inline: c.Inline}
}

// CheckNamespace reports whether ns may be the namespace of a urn:air
// identifier cardsign makes: 1–64 bytes of segments separated by single
// colons, each segment lowercase ASCII letters, digits and hyphens, not
// starting or ending with a hyphen ("a2a", "finance:agents"). urn:air lets
// a namespace hold colons; the rule keeps out what would need escaping in a
// URN (RFC 8141) or read ambiguously (an empty segment).
func CheckNamespace(ns string) error {
	if ns == "" || len(ns) > maxNamespaceBytes {
		return fmt.Errorf("must be 1–%d bytes", maxNamespaceBytes)
	}
	for seg := range strings.SplitSeq(ns, ":") {
		if seg == "" {
			return fmt.Errorf("has an empty segment: separate segments with single colons, none at either end")
		}
		if seg[0] == '-' || seg[len(seg)-1] == '-' {
			return fmt.Errorf("segment %q starts or ends with a hyphen", seg)
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("has %q: only lowercase ASCII letters, digits, hyphens and ':' between segments", string(rune(c)))
			}
		}
	}
	return nil
}

// checkDisplayName allows an empty name (the default applies) or 1–200
// characters of valid UTF-8 with no control characters: it is shown to
// people in catalog browsers, where a newline or an escape sequence could
// forge what they see.
func checkDisplayName(s string) error {
	switch {
	case s == "":
		return nil
	case !utf8.ValidString(s):
		return fmt.Errorf("is not valid UTF-8")
	case utf8.RuneCountInString(s) > maxDisplayNameRunes:
		return fmt.Errorf("is longer than %d characters", maxDisplayNameRunes)
	case strings.TrimSpace(s) != s:
		return fmt.Errorf("starts or ends with white space")
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("has the control or format character %U", r)
		}
	}
	return nil
}

// checkBaseURL: an absolute https URL with a host, no user information,
// query or fragment (entries' urls are made by appending a path to it).
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("is not a URL: %v", err)
	case u.Scheme != "https":
		return fmt.Errorf("must be an https URL: consumers fetch the cards from it and check their digests")
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("has no host")
	case u.User != nil:
		return fmt.Errorf("must not carry user information")
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("must not have a query: card paths are appended to it")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("must not have a fragment: card paths are appended to it")
	}
	return nil
}

// CheckCatalogKeys refuses a catalog no key can sign: did-web-v1 signs with
// ES256 (P-256) only, and the catalog is signed with the key
// registry/catalog.SignerView picks (the active key when it is ES256, else
// a pending ES256 one scheduled to activate, either with a kid that can be
// a DID URL fragment). The same predicate decides here, so --check-config
// and the daemon's start agree with what the duty holder will sign with;
// with no record at all, the first key cardsignd makes, of
// keys.default_alg. The daemon runs it at start, before it writes, and
// --check-config too.
func (c *Config) CheckCatalogKeys(recs []jwks.KeyRecord) error {
	if !c.Catalog.Enabled() {
		return nil
	}
	problem := func(path, format string, args ...any) error {
		return &Error{File: c.file, Problems: []Problem{{Path: path, Message: fmt.Sprintf(format, args...)}}, positions: c.positions}
	}
	if len(recs) == 0 {
		if jose.Alg(c.Keys.DefaultAlg) != jose.ES256 {
			return problem("keys.default_alg", "is %s, so the first key cardsignd makes cannot sign the catalog (catalog.domain is set; did-web-v1 takes ES256 keys only): set keys.default_alg: ES256", c.Keys.DefaultAlg)
		}
		return nil
	}
	views := jwks.Derive(time.Now().Add(c.ClockSkew), recs, jwks.Policy{RetireGrace: c.Keys.RetireGrace})
	if _, ok := catalog.SignerView(views); ok {
		return nil
	}
	// The keys still in play, named for the operator: none of them can
	// sign the catalog now.
	var others []string
	for _, v := range views {
		switch v.State {
		case jwks.StateScheduled, jwks.StatePending, jwks.StateActive:
			others = append(others, fmt.Sprintf("%s (%s, %s)", strictjson.QuoteForMessage(v.KID), v.Alg, v.State))
		}
	}
	held := "none"
	if len(others) > 0 {
		held = strings.Join(others, ", ")
	}
	how := "add a P-256 key that signs with the catalog off (cardsign keys rotate --alg ES256, or keys create --alg ES256 then keys activate KID: a created key signs nothing until activated), then set catalog.domain"
	if jose.Alg(c.Keys.DefaultAlg) != jose.ES256 {
		how += ", and set keys.default_alg: ES256 so rotations keep making one"
	}
	return problem("catalog.domain", "the catalog is signed with ES256 (did-web-v1 takes P-256 keys only) by the active key, else by a pending key scheduled to activate, whose kid can be a DID URL fragment (1 to 128 of A-Z a-z 0-9 . _ ~ -), and no key on record is such a key (keys not revoked, expired or retired: %s): %s", held, how)
}
