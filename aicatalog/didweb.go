package aicatalog

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Names the specification fixes.
const (
	// Profile is the did:web Signer Profile's selector.
	Profile = "did-web-v1"
	// TypManifest and TypCatalog are the protected "typ" of a Trust Manifest
	// signature and of the catalog snapshot signature; each refuses the
	// other, so neither can be replayed as the other.
	TypManifest = "ai-catalog-trust-manifest+jws"
	TypCatalog  = "ai-catalog+jws"
	// MediaType is the catalog document's media type.
	MediaType = "application/ai-catalog+json"
	// A2ACardType is an entry's type for an A2A Agent Card.
	A2ACardType = "application/a2a-agent-card+json"
	// WellKnownPath is where a host serves its catalog (RFC 8615), and
	// DIDPath where a root did:web DID's document is.
	WellKnownPath = "/.well-known/ai-catalog.json"
	DIDPath       = "/.well-known/did.json"
	// SpecVersion is the catalog specification version written.
	SpecVersion = "1.0"
	// RelationPublishedFrom is the provenance relation of the source
	// repository an artifact was built from.
	RelationPublishedFrom = "publishedFrom"
)

// ErrNotRootDID: a DID is not a root did:web DID (did:web:DOMAIN, lowercase
// ASCII, no port, path, IP address, trailing dot or U-label).
var ErrNotRootDID = errors.New("not a root did:web DID")

// CheckDomain reports whether domain may name a root did:web DID and the
// publisher of a urn:air identifier: lowercase ASCII labels of letters,
// digits and hyphens (IDNA A-labels allowed), no label starting or ending
// with a hyphen, at least two labels, no port, no IP address, no trailing
// dot. The error says which rule fails.
func CheckDomain(domain string) error {
	switch {
	case domain == "":
		return errors.New("empty domain")
	case len(domain) > 253:
		return fmt.Errorf("domain is %d bytes, more than 253", len(domain))
	case strings.HasSuffix(domain, "."):
		return errors.New("domain ends with a dot; write it without the root dot")
	case strings.ContainsAny(domain, ":%"):
		return errors.New("domain has a port or percent-encoding; a root did:web names a host on port 443 only")
	}
	if _, err := netip.ParseAddr(strings.Trim(domain, "[]")); err == nil {
		return errors.New("domain is an IP address; did:web names a DNS host")
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return errors.New("domain has a single label; use a fully qualified name such as example.com")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("label %q is empty or longer than 63 bytes", l)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with a hyphen", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("label %q has %q: only lowercase ASCII letters, digits and hyphens (IDNA A-labels for other scripts)", l, string(rune(c)))
			}
		}
	}
	if allDigits(labels[len(labels)-1]) {
		return errors.New("domain's last label is numeric; did:web names a DNS host")
	}
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// DID is the root did:web DID of domain (not checked; see CheckDomain).
func DID(domain string) string { return "did:web:" + domain }

// DomainOf returns the domain of a root did:web DID, or an error wrapping
// ErrNotRootDID that says which rule fails.
func DomainOf(did string) (string, error) {
	domain, ok := strings.CutPrefix(did, "did:web:")
	if !ok {
		return "", fmt.Errorf("%w: %q does not start with \"did:web:\"", ErrNotRootDID, did)
	}
	if err := CheckDomain(domain); err != nil {
		return "", fmt.Errorf("%w: %s", ErrNotRootDID, err)
	}
	return domain, nil
}

// KID is the JWS kid of the verification method fragment of did:
// "did:web:example.com#" + fragment.
func KID(did, fragment string) string { return did + "#" + fragment }

// CheckFragment reports whether s may be the fragment of a kid cardsign
// makes: 1–128 of [A-Za-z0-9._~-] (a JWKS kid, the RFC 7638 thumbprint in
// base64url, is one).
func CheckFragment(s string) error {
	if s == "" || len(s) > 128 {
		return errors.New("fragment must be 1–128 characters")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '~' || c == '-') {
			return fmt.Errorf("fragment has %q: only [A-Za-z0-9._~-]", string(rune(c)))
		}
	}
	return nil
}

// Identifier is the urn:air identifier of an artifact published by domain:
// "urn:air:" + domain + ":" + namespace + ":" + name.
func Identifier(domain, namespace, name string) string {
	return "urn:air:" + domain + ":" + namespace + ":" + name
}

// PublisherOf returns the publisher segment of a urn:air identifier (the
// text after "urn:air:" up to the next colon), or ok false when id is not
// a urn:air identifier with a publisher, namespace and name.
func PublisherOf(id string) (publisher string, ok bool) {
	rest, ok := strings.CutPrefix(id, "urn:air:")
	if !ok {
		return "", false
	}
	publisher, tail, ok := strings.Cut(rest, ":")
	if !ok || publisher == "" {
		return "", false
	}
	// the namespace may hold colons; the name follows the last one
	if i := strings.LastIndexByte(tail, ':'); i <= 0 || i == len(tail)-1 {
		return "", false
	}
	return publisher, true
}
