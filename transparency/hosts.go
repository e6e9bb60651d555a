package transparency

import (
	"slices"
	"strings"

	"github.com/cardsign/cardsign/glob"
)

// CardHosts returns the hosts a card points at (card.InterfaceHosts) as an
// entry lists them: lower case, without a trailing dot, sorted, each once,
// all of them (an entry lists at most MaxHosts: cardsignd refuses a card with
// more).
func CardHosts(hosts []string) []string {
	out := sortedHosts(hosts)
	if len(out) == 0 {
		return nil
	}
	return out
}

// normalHosts sorts hosts, drops repeats and empty or overlong names, and
// keeps at most MaxHosts (a card with more is not signed; the cap keeps an
// entry within a bundle's bounds whatever a caller passes).
func normalHosts(hosts []string) []string {
	out := sortedHosts(hosts)
	if len(out) > MaxHosts {
		out = out[:MaxHosts]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// sortedHosts normalizes hosts, sorts them and drops repeats and names
// normalHost refuses.
func sortedHosts(hosts []string) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if h = normalHost(h); h != "" {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
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

// MatchesWatch reports whether e matches the watch w: its card name is w
// or matches it as a glob pattern, or one of its hosts is w (in lower
// case) or matches it as a pattern.
func MatchesWatch(e Entry, w string) bool {
	if glob.Match(w, e.Card.Name) || e.MatchesHost(w) {
		return true
	}
	if strings.ContainsAny(w, "*?") {
		lw := strings.ToLower(w)
		for _, h := range e.Card.Hosts {
			if glob.Match(lw, h) {
				return true
			}
		}
	}
	return false
}
