// Package carddiff computes what an Agent Card changes against the previous
// card of the same agent: hosts, interfaces, security schemes, OAuth flows
// and scopes, skills, version. Signing policy rules ask about these facts
// (the CEL variable diff), and approvers read them (cardsign approvals
// show).
//
// It works on cards in the v1.0 shape that card.Load returns, as JSON
// values; a card in a shape lint would refuse does not make it fail: a
// member of the wrong type simply differs.
package carddiff

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/strictjson"
)

// Diff is what a card changes against the previous one. Lists are sorted
// and never nil (a CEL rule calls size() on them); for a first version
// (First) everything in the card counts as added. The cel tags are the
// names rules use; the JSON encoding (MarshalJSON) uses the same names.
type Diff struct {
	First                       bool     `cel:"first"`
	Changed                     []string `cel:"changed"`
	HostsAdded                  []string `cel:"hosts_added"`
	HostsRemoved                []string `cel:"hosts_removed"`
	InterfacesAdded             []string `cel:"interfaces_added"`
	InterfacesRemoved           []string `cel:"interfaces_removed"`
	InterfacesChanged           bool     `cel:"interfaces_changed"`
	SecuritySchemesAdded        []string `cel:"security_schemes_added"`
	SecuritySchemesRemoved      []string `cel:"security_schemes_removed"`
	SecuritySchemesChanged      []string `cel:"security_schemes_changed"`
	SecurityRequirementsChanged bool     `cel:"security_requirements_changed"`
	OAuthFlowsAdded             []string `cel:"oauth_flows_added"`
	OAuthFlowsRemoved           []string `cel:"oauth_flows_removed"`
	ScopesAdded                 []string `cel:"scopes_added"`
	ScopesRemoved               []string `cel:"scopes_removed"`
	SkillsAdded                 []string `cel:"skills_added"`
	SkillsRemoved               []string `cel:"skills_removed"`
	SkillsChanged               []string `cel:"skills_changed"`
	VersionChanged              bool     `cel:"version_changed"`
	Version                     string   `cel:"version"`
	PreviousVersion             string   `cel:"previous_version"`
	ExtendedCardChanged         bool     `cel:"extended_card_changed"`
	NameChanged                 bool     `cel:"name_changed"`
}

// Compute is what cur changes against previous; a previous of JSON null
// (the zero Value) means there is none. The cards' signatures members are
// not compared.
func Compute(cur, previous strictjson.Value) Diff {
	d := Diff{First: previous.Kind == strictjson.Null}
	member := func(v strictjson.Value, key string) strictjson.Value {
		m, _ := v.Get(key)
		return m
	}
	for _, k := range topKeys(cur, previous) {
		if k != "signatures" && !equal(member(cur, k), member(previous, k)) {
			d.Changed = append(d.Changed, k)
		}
	}
	d.HostsAdded, d.HostsRemoved = added(hosts(cur), hosts(previous))
	d.InterfacesAdded, d.InterfacesRemoved = added(interfaces(cur), interfaces(previous))
	d.InterfacesChanged = !equal(member(cur, "supportedInterfaces"), member(previous, "supportedInterfaces"))
	curSchemes, prevSchemes := objectMembers(member(cur, "securitySchemes")), objectMembers(member(previous, "securitySchemes"))
	d.SecuritySchemesAdded, d.SecuritySchemesRemoved, d.SecuritySchemesChanged = keyed(curSchemes, prevSchemes)
	d.SecurityRequirementsChanged = !equal(member(cur, "securityRequirements"), member(previous, "securityRequirements"))
	curFlows, curScopes := oauth(curSchemes)
	prevFlows, prevScopes := oauth(prevSchemes)
	d.OAuthFlowsAdded, d.OAuthFlowsRemoved = added(curFlows, prevFlows)
	d.ScopesAdded, d.ScopesRemoved = added(curScopes, prevScopes)
	d.SkillsAdded, d.SkillsRemoved, d.SkillsChanged = keyed(skills(cur), skills(previous))
	d.VersionChanged = !equal(member(cur, "version"), member(previous, "version"))
	if v := member(previous, "version"); v.Kind == strictjson.String {
		d.PreviousVersion = v.Str
	}
	if v := member(cur, "version"); v.Kind == strictjson.String {
		d.Version = v.Str
	}
	d.ExtendedCardChanged = !equal(member(member(cur, "capabilities"), "extendedAgentCard"), member(member(previous, "capabilities"), "extendedAgentCard"))
	d.NameChanged = !equal(member(cur, "name"), member(previous, "name"))
	d.normalise()
	return d
}

// normalise makes every list sorted and non-nil.
func (d *Diff) normalise() {
	for _, l := range d.lists() {
		if *l.list == nil {
			*l.list = []string{}
		}
		slices.Sort(*l.list)
		*l.list = slices.Compact(*l.list)
	}
}

// Empty reports whether cur changes nothing against an existing previous
// card.
func (d Diff) Empty() bool { return !d.First && len(d.Changed) == 0 }

// equal compares two JSON values as RFC 8785 does: member order does not
// count, numbers compare by value. It walks both values without
// allocating: it runs over whole cards on every sign.
func equal(a, b strictjson.Value) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case strictjson.Null:
		return true
	case strictjson.Bool:
		return a.Bool == b.Bool
	case strictjson.String:
		return a.Str == b.Str
	case strictjson.Number:
		if a.Str == b.Str {
			return true
		}
		x, errA := strconv.ParseFloat(a.Str, 64)
		y, errB := strconv.ParseFloat(b.Str, 64)
		return errA == nil && errB == nil && x == y
	case strictjson.Array:
		if len(a.Arr) != len(b.Arr) {
			return false
		}
		for i := range a.Arr {
			if !equal(a.Arr[i], b.Arr[i]) {
				return false
			}
		}
		return true
	}
	// Objects: strictjson refuses duplicate names, so equal sizes and
	// every member of a found equal in b make them equal.
	if len(a.Obj) != len(b.Obj) {
		return false
	}
	for i, m := range a.Obj {
		// Members usually come in the same order: try the same index first.
		if i < len(b.Obj) && b.Obj[i].Key == m.Key {
			if !equal(m.Val, b.Obj[i].Val) {
				return false
			}
			continue
		}
		other, ok := b.Get(m.Key)
		if !ok || !equal(m.Val, other) {
			return false
		}
	}
	return true
}

// topKeys are the member names of either card, sorted.
func topKeys(a, b strictjson.Value) []string {
	var keys []string
	for _, v := range []strictjson.Value{a, b} {
		if v.Kind == strictjson.Object {
			for _, m := range v.Obj {
				keys = append(keys, m.Key)
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// added returns what is in cur and not in prev, and what is in prev and
// not in cur.
func added(cur, prev []string) (plus, minus []string) {
	for _, s := range cur {
		if !slices.Contains(prev, s) {
			plus = append(plus, s)
		}
	}
	for _, s := range prev {
		if !slices.Contains(cur, s) {
			minus = append(minus, s)
		}
	}
	return plus, minus
}

// keyed compares two maps of named values: names added, removed, and
// present in both with another value.
func keyed(cur, prev map[string]strictjson.Value) (plus, minus, changed []string) {
	for k, v := range cur {
		p, ok := prev[k]
		switch {
		case !ok:
			plus = append(plus, k)
		case !equal(v, p):
			changed = append(changed, k)
		}
	}
	for k := range prev {
		if _, ok := cur[k]; !ok {
			minus = append(minus, k)
		}
	}
	return plus, minus, changed
}

// hosts are the hosts the card's interfaces point at: lower case, without
// port or trailing dot.
func hosts(v strictjson.Value) []string {
	var out []string
	for _, h := range card.InterfaceHosts(v) {
		out = append(out, strings.TrimSuffix(strings.ToLower(h), "."))
	}
	return out
}

// interfaces are the card's interfaces as "BINDING URL".
func interfaces(v strictjson.Value) []string {
	ifaces, _ := v.Get("supportedInterfaces")
	var out []string
	for _, it := range ifaces.Arr {
		b, _ := it.Get("protocolBinding")
		u, _ := it.Get("url")
		if u.Kind == strictjson.String {
			out = append(out, strings.TrimSpace(b.Str+" "+u.Str))
		}
	}
	return out
}

// objectMembers is an object's members by name (empty for anything else).
func objectMembers(v strictjson.Value) map[string]strictjson.Value {
	out := map[string]strictjson.Value{}
	if v.Kind == strictjson.Object {
		for _, m := range v.Obj {
			out[m.Key] = m.Val
		}
	}
	return out
}

// oauth lists the OAuth 2 flows ("SCHEME.FLOW") and scopes
// ("SCHEME.FLOW.SCOPE") of the security schemes.
func oauth(schemes map[string]strictjson.Value) (flows, scopes []string) {
	for name, s := range schemes {
		o, _ := s.Get("oauth2SecurityScheme")
		fl, _ := o.Get("flows")
		if fl.Kind != strictjson.Object {
			continue
		}
		for _, f := range fl.Obj {
			flows = append(flows, name+"."+f.Key)
			sc, _ := f.Val.Get("scopes")
			if sc.Kind != strictjson.Object {
				continue
			}
			for _, s := range sc.Obj {
				scopes = append(scopes, name+"."+f.Key+"."+s.Key)
			}
		}
	}
	return flows, scopes
}

// skills are the card's skills by id (skills without a string id are not
// counted: lint refuses them).
func skills(v strictjson.Value) map[string]strictjson.Value {
	out := map[string]strictjson.Value{}
	sk, _ := v.Get("skills")
	for _, s := range sk.Arr {
		if id, _ := s.Get("id"); id.Kind == strictjson.String {
			out[id.Str] = s
		}
	}
	return out
}

// Lines renders the facts for a reader, one per line: "+" added, "-"
// removed, "~" changed. Strings from the cards are quoted where they are
// not plain (a host or id with spaces, quotes or control characters).
func (d Diff) Lines() []string {
	var out []string
	if d.First {
		out = append(out, "(first version of this agent: everything in the card is new)")
	}
	list := func(sign, what string, items []string) {
		for _, s := range items {
			out = append(out, sign+" "+what+" "+show(s))
		}
	}
	list("+", "host", d.HostsAdded)
	list("-", "host", d.HostsRemoved)
	list("+", "interface", d.InterfacesAdded)
	list("-", "interface", d.InterfacesRemoved)
	list("+", "security scheme", d.SecuritySchemesAdded)
	list("-", "security scheme", d.SecuritySchemesRemoved)
	list("~", "security scheme", d.SecuritySchemesChanged)
	if d.SecurityRequirementsChanged && !d.First {
		out = append(out, "~ security requirements")
	}
	list("+", "OAuth flow", d.OAuthFlowsAdded)
	list("-", "OAuth flow", d.OAuthFlowsRemoved)
	list("+", "scope", d.ScopesAdded)
	list("-", "scope", d.ScopesRemoved)
	list("+", "skill", d.SkillsAdded)
	list("-", "skill", d.SkillsRemoved)
	list("~", "skill", d.SkillsChanged)
	if d.ExtendedCardChanged && !d.First {
		out = append(out, "~ capabilities.extendedAgentCard")
	}
	if d.NameChanged && !d.First {
		out = append(out, "~ name")
	}
	if d.VersionChanged && !d.First {
		out = append(out, fmt.Sprintf("version %s → %s", show(d.PreviousVersion), show(d.Version)))
	}
	if !d.First && len(d.Changed) > 0 {
		out = append(out, "changed members: "+strings.Join(mapShow(d.Changed), ", "))
	}
	return out
}

func mapShow(items []string) []string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = show(s)
	}
	return out
}

// show prints s as it is when it is plain text (no space, quote,
// backslash or unprintable character), else quoted.
func show(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || !strconv.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// Unsigned is v without its signatures member: what rules over a card see
// (the policy's card and previous), offline and in cardsignd alike. v is
// not changed.
func Unsigned(v strictjson.Value) strictjson.Value {
	if _, ok := v.Get("signatures"); !ok {
		return v
	}
	out := v
	out.Obj = make([]strictjson.Member, 0, len(v.Obj))
	for _, m := range v.Obj {
		if m.Key != "signatures" {
			out.Obj = append(out.Obj, m)
		}
	}
	return out
}
