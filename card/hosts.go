package card

import (
	"net"
	"net/url"

	"github.com/cardsign/cardsign/strictjson"
)

// InterfaceHosts returns the hosts a card's supportedInterfaces[].url (and a
// v0.3 card's url) point at, as written and in document order. A bare
// host:port (gRPC's form) is read as one, as lint and the signing policy
// read it (IsHostPort); the userinfo of a URL is not its host; a URL without
// a host is skipped: lint refuses such a card before it is signed anyway.
// The transparency log lists these hosts in a card's entry.
func InterfaceHosts(v strictjson.Value) []string {
	var hosts []string
	add := func(raw strictjson.Value) {
		if raw.Kind != strictjson.String {
			return
		}
		var host string
		if IsHostPort(raw.Str) {
			host, _, _ = net.SplitHostPort(raw.Str)
		} else if u, err := url.Parse(raw.Str); err == nil {
			host = u.Hostname()
		}
		if host != "" {
			hosts = append(hosts, host)
		}
	}
	if ifaces, ok := v.Get("supportedInterfaces"); ok && ifaces.Kind == strictjson.Array {
		for _, it := range ifaces.Arr {
			u, _ := it.Get("url")
			add(u)
		}
	}
	if u, ok := v.Get("url"); ok {
		add(u)
	}
	return hosts
}
