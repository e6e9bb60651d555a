package transparency

import (
	"net/url"
	"slices"
	"strings"

	"github.com/cardsign/cardsign/card"
)

// CardHosts returns the hosts a card's supportedInterfaces[].url (and a v0.3
// card's url) point at: lower case, without a trailing dot, sorted, each
// once. A URL without a host is skipped: the entry lists what a monitor can
// match, and lint refuses such a card before it is signed anyway.
func CardHosts(v card.Value) []string {
	var hosts []string
	add := func(raw card.Value) {
		if raw.Kind != card.String {
			return
		}
		u, err := url.Parse(raw.Str)
		if err != nil {
			return
		}
		if h := normalHost(u.Hostname()); h != "" {
			hosts = append(hosts, h)
		}
	}
	if ifaces, ok := v.Get("supportedInterfaces"); ok && ifaces.Kind == card.Array {
		for _, it := range ifaces.Arr {
			u, _ := it.Get("url")
			add(u)
		}
	}
	if u, ok := v.Get("url"); ok {
		add(u)
	}
	return normalHosts(hosts)
}

// normalHosts sorts hosts, drops repeats and empty or overlong names, and
// keeps at most MaxHosts.
func normalHosts(hosts []string) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if h = normalHost(h); h != "" {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxHosts {
		out = out[:MaxHosts]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// normalHost is a host as entries and --watch compare it.
func normalHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if len(h) > 253 {
		return ""
	}
	return h
}

// MatchesHost reports whether the entry's card points at host (compared as
// CardHosts writes hosts).
func (e Entry) MatchesHost(host string) bool {
	return slices.Contains(e.Card.Hosts, normalHost(host))
}
