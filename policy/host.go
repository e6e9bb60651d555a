package policy

import (
	"fmt"
	"net/netip"
	"strings"
)

type hostKind uint8

const (
	exactHost  hostKind = iota // name is the whole host
	anyHost                    // "*"
	suffixHost                 // "*.example.com": name is ".example.com"
	ipHost                     // an IP address
)

// hostPattern is one compiled entry of a rule's hosts.
type hostPattern struct {
	kind hostKind
	name string     // lower case, without a trailing dot
	addr netip.Addr // for ipHost, unmapped
}

// parseHostPattern compiles one hosts entry, or says why it is not one.
// Patterns are strict because a pattern that cannot match as written (a
// scheme, a port) would silently refuse every card, and one that matches
// more than it seems to ("*example.com" matching "evilexample.com") would
// silently allow too much.
func parseHostPattern(s string) (hostPattern, string) {
	switch {
	case s == "":
		return hostPattern{}, `empty host pattern; use "*" for any host`
	case s == "*":
		return hostPattern{kind: anyHost}, ""
	case strings.Contains(s, "://"):
		return hostPattern{}, fmt.Sprintf("host pattern %q has a scheme; write the host alone", s)
	case strings.ContainsAny(s, "/?#"):
		return hostPattern{}, fmt.Sprintf("host pattern %q has a path; write the host alone", s)
	case strings.Contains(s, "@"):
		return hostPattern{}, fmt.Sprintf("host pattern %q has userinfo; write the host alone", s)
	case strings.HasPrefix(s, "["):
		return hostPattern{}, fmt.Sprintf("host pattern %q: write IPv6 addresses without brackets", s)
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return hostPattern{}, fmt.Sprintf("host pattern %q has an IPv6 zone, which a card url cannot usefully name", s)
		}
		return hostPattern{kind: ipHost, addr: a.Unmap()}, ""
	}
	if strings.Contains(s, ":") {
		return hostPattern{}, fmt.Sprintf("host pattern %q has a port; ports are not matched, write the host alone", s)
	}
	name := strings.TrimSuffix(strings.ToLower(s), ".")
	kind := exactHost
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		name, kind = rest, suffixHost
	}
	if strings.Contains(name, "*") {
		return hostPattern{}, fmt.Sprintf(`host pattern %q: '*' may only be the whole first label, as in "*.example.com"`, s)
	}
	if msg := checkDNSName(name); msg != "" {
		return hostPattern{}, fmt.Sprintf("host pattern %q is not a DNS name: %s", s, msg)
	}
	if kind == suffixHost {
		name = "." + name
	}
	return hostPattern{kind: kind, name: name}, ""
}

// checkDNSName returns why the lower-case name s is not a DNS host name, or
// "". Letters, digits, '-' and '_' (seen in internal names) are allowed;
// anything else, non-ASCII included, is refused, so that two spellings that
// resolve alike cannot compare differently.
func checkDNSName(s string) string {
	if s == "" {
		return "empty name"
	}
	if len(s) > 253 {
		return "longer than 253 characters"
	}
	for label := range strings.SplitSeq(s, ".") {
		switch {
		case label == "":
			return "empty label"
		case len(label) > 63:
			return "label longer than 63 characters"
		case label[0] == '-' || label[len(label)-1] == '-':
			return "label starts or ends with '-'"
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c >= 0x80:
				return "non-ASCII characters (write internationalised names in their xn-- form)"
			default:
				return fmt.Sprintf("character %q not allowed", rune(c))
			}
		}
	}
	return ""
}
