package card

import (
	"fmt"

	"github.com/cardsign/cardsign/strictjson"
)

// Version strings of the two card shapes.
const (
	V03 = "0.3"
	V10 = "1.0"
)

// Note says what Upgrade changed, so that a person can see why the signed
// card differs from the one they sent.
type Note struct {
	Path    string
	Message string
}

func (n Note) String() string { return n.Path + ": " + n.Message }

// IsV03 reports whether v has the v0.3 shape: a top-level url and no
// supportedInterfaces (DESIGN.md §3).
func IsV03(v strictjson.Value) bool {
	return v.Kind == strictjson.Object && v.Has("url") && !v.Has("supportedInterfaces")
}

// v03Only are the top-level v0.3 members that have no v1.0 field of their own.
var v03Only = []string{"url", "preferredTransport", "additionalInterfaces", "protocolVersion", "supportsAuthenticatedExtendedCard", "security"}

// Upgrade maps a v0.3 card to the v1.0 shape, the way the shipped SDKs read an
// old card (@a2a-js/sdk compat/v0_3 toCoreAgentCard): url, preferredTransport
// and additionalInterfaces become supportedInterfaces with protocolVersion
// "0.3" (DESIGN.md §3; the JS SDK copies the card's protocolVersion, such as
// "0.3.0", into the first interface instead); supportsAuthenticatedExtendedCard becomes
// capabilities.extendedAgentCard; security becomes securityRequirements (on
// the card and on each skill); type-discriminated security schemes become
// v1.0 wrapper objects with `in` renamed to `location`; an OAuth flows object
// keeps the first of authorizationCode, clientCredentials, implicit and
// password. A v0.3 card that also carries the v1.0 name of a mapped member
// (security and securityRequirements, say) is refused: which one the author
// meant cannot be known. A v1.0 card is returned unchanged with no notes.
func Upgrade(v strictjson.Value) (strictjson.Value, []Note, error) {
	if !IsV03(v) {
		return v, nil, nil
	}
	u := upgrader{}
	out, err := u.card(v)
	return out, u.notes, err
}

type upgrader struct{ notes []Note }

func (u *upgrader) note(p *strictjson.Path, format string, args ...any) {
	u.notes = append(u.notes, Note{Path: p.String(), Message: fmt.Sprintf(format, args...)})
}

func v03Error(p *strictjson.Path, format string, args ...any) *strictjson.Error {
	return &strictjson.Error{Path: p.String(), Rule: RuleV03, Offset: -1, Reason: fmt.Sprintf(format, args...)}
}

func (u *upgrader) card(v strictjson.Value) (strictjson.Value, error) {
	root := strictjson.Root()
	if err := conflict(v, root, "security", "securityRequirements"); err != nil {
		return strictjson.Value{}, err
	}
	ifaces, err := u.interfaces(v, root)
	if err != nil {
		return strictjson.Value{}, err
	}
	out := make([]strictjson.Member, 0, len(v.Obj)+1)
	placed := false
	for _, m := range v.Obj {
		mp := root.Key(m.Key)
		switch m.Key {
		case "url":
			// supportedInterfaces takes the place of url, the v0.3 endpoint.
			out = append(out, strictjson.Member{Key: "supportedInterfaces", Val: ifaces})
			placed = true
			continue
		case "preferredTransport", "additionalInterfaces", "supportsAuthenticatedExtendedCard":
			continue // folded into supportedInterfaces / capabilities
		case "protocolVersion":
			u.note(mp, "removed: v1.0 carries the protocol version per interface")
			continue
		case "security":
			reqs, err := securityRequirements(m.Val, mp)
			if err != nil {
				return strictjson.Value{}, err
			}
			out = append(out, strictjson.Member{Key: "securityRequirements", Val: reqs})
			u.note(mp, "renamed to securityRequirements in the v1.0 shape")
			continue
		}
		// Members that keep their name but change inside.
		var convert func(strictjson.Value, *strictjson.Path) (strictjson.Value, error)
		switch m.Key {
		case "capabilities":
			convert = u.capabilities
		case "securitySchemes":
			convert = u.securitySchemes
		case "skills":
			convert = u.skills
		}
		if convert != nil {
			val, err := convert(m.Val, mp)
			if err != nil {
				return strictjson.Value{}, err
			}
			m.Val = val
		}
		out = append(out, m)
	}
	if !placed {
		out = append(out, strictjson.Member{Key: "supportedInterfaces", Val: ifaces})
	}
	res := strictjson.Value{Kind: strictjson.Object, Obj: out}
	if sa, ok := v.Get("supportsAuthenticatedExtendedCard"); ok {
		sp := root.Key("supportsAuthenticatedExtendedCard")
		if sa.Kind != strictjson.Bool {
			return strictjson.Value{}, typeError(sp, sa, "a boolean")
		}
		caps, _ := res.Get("capabilities")
		if caps.Kind != strictjson.Object {
			caps = strictjson.ObjectValue()
		}
		if caps.Has("extendedAgentCard") {
			return strictjson.Value{}, v03Error(sp, "the card also has capabilities.extendedAgentCard; keep one of them")
		}
		res = res.With("capabilities", caps.With("extendedAgentCard", sa))
		u.note(sp, "moved to capabilities.extendedAgentCard")
	}
	return res, nil
}

// conflict refuses an object that has both the v0.3 name and the v1.0 name of
// a member that the mapping renames.
func conflict(v strictjson.Value, p *strictjson.Path, v03, v10 string) error {
	if v.Has(v03) && v.Has(v10) {
		return v03Error(p.Key(v03), "the card also has %s; a v0.3 card is mapped, so keep only %s (or write the card in the v1.0 shape)", v10, v03)
	}
	return nil
}

func (u *upgrader) interfaces(v strictjson.Value, root *strictjson.Path) (strictjson.Value, error) {
	url, _ := v.Get("url")
	if url.Kind != strictjson.String {
		return strictjson.Value{}, typeError(root.Key("url"), url, "a string")
	}
	binding := strictjson.StringValue("JSONRPC")
	if t, ok := v.Get("preferredTransport"); ok {
		if t.Kind != strictjson.String {
			return strictjson.Value{}, typeError(root.Key("preferredTransport"), t, "a string")
		}
		binding = t
	}
	primary := strictjson.ObjectValue(strictjson.Member{Key: "url", Val: url}, strictjson.Member{Key: "protocolBinding", Val: binding}, strictjson.Member{Key: "protocolVersion", Val: strictjson.StringValue(V03)})
	ifaces := []strictjson.Value{primary}
	u.note(root.Key("url"), "url and preferredTransport became supportedInterfaces[0] (protocolBinding %s, protocolVersion %q)", strictjson.QuoteForMessage(binding.Str), V03)
	if extra, ok := v.Get("additionalInterfaces"); ok {
		ap := root.Key("additionalInterfaces")
		if extra.Kind != strictjson.Array {
			return strictjson.Value{}, typeError(ap, extra, "an array of {url, transport} objects")
		}
		for i, e := range extra.Arr {
			ep := ap.Index(i)
			if e.Kind != strictjson.Object {
				return strictjson.Value{}, typeError(ep, e, "an object with url and transport")
			}
			eu, _ := e.Get("url")
			et, _ := e.Get("transport")
			if eu.Kind != strictjson.String {
				return strictjson.Value{}, typeError(ep.Key("url"), eu, "a string")
			}
			if et.Kind != strictjson.String {
				return strictjson.Value{}, typeError(ep.Key("transport"), et, "a string")
			}
			ifaces = append(ifaces, strictjson.ObjectValue(strictjson.Member{Key: "url", Val: eu}, strictjson.Member{Key: "protocolBinding", Val: et}, strictjson.Member{Key: "protocolVersion", Val: strictjson.StringValue(V03)}))
		}
		u.note(ap, "became supportedInterfaces[1:] (protocolVersion %q)", V03)
	}
	return strictjson.Value{Kind: strictjson.Array, Arr: ifaces}, nil
}

func (u *upgrader) capabilities(caps strictjson.Value, p *strictjson.Path) (strictjson.Value, error) {
	if caps.Kind != strictjson.Object {
		return strictjson.Value{}, typeError(p, caps, "an object (AgentCapabilities)")
	}
	if caps.Has("stateTransitionHistory") {
		caps = caps.Without("stateTransitionHistory")
		u.note(p.Key("stateTransitionHistory"), "removed: v1.0 has no stateTransitionHistory capability")
	}
	return caps, nil
}

func (u *upgrader) skills(skills strictjson.Value, p *strictjson.Path) (strictjson.Value, error) {
	if skills.Kind != strictjson.Array {
		return skills, nil // lint reports the type
	}
	out := make([]strictjson.Value, len(skills.Arr))
	for i, s := range skills.Arr {
		out[i] = s
		sec, ok := s.Get("security")
		if !ok {
			continue
		}
		sp := p.Index(i).Key("security")
		if err := conflict(s, p.Index(i), "security", "securityRequirements"); err != nil {
			return strictjson.Value{}, err
		}
		reqs, err := securityRequirements(sec, sp)
		if err != nil {
			return strictjson.Value{}, err
		}
		renamed := make([]strictjson.Member, len(s.Obj))
		for j, m := range s.Obj {
			if m.Key == "security" {
				m = strictjson.Member{Key: "securityRequirements", Val: reqs}
			}
			renamed[j] = m
		}
		out[i] = strictjson.Value{Kind: strictjson.Object, Obj: renamed}
		u.note(sp, "renamed to securityRequirements in the v1.0 shape")
	}
	return strictjson.Value{Kind: strictjson.Array, Arr: out}, nil
}

// securityRequirements maps v0.3 [{"scheme": ["scope", …]}] to v1.0
// [{"schemes": {"scheme": {"list": ["scope", …]}}}].
func securityRequirements(sec strictjson.Value, p *strictjson.Path) (strictjson.Value, error) {
	if sec.Kind != strictjson.Array {
		return strictjson.Value{}, typeError(p, sec, "an array of {scheme: [scopes]} objects")
	}
	out := make([]strictjson.Value, len(sec.Arr))
	for i, req := range sec.Arr {
		rp := p.Index(i)
		if req.Kind != strictjson.Object {
			return strictjson.Value{}, typeError(rp, req, "an object mapping scheme names to scope arrays")
		}
		schemes := make([]strictjson.Member, len(req.Obj))
		for j, m := range req.Obj {
			if m.Val.Kind != strictjson.Array {
				return strictjson.Value{}, typeError(rp.Key(m.Key), m.Val, "an array of scope strings")
			}
			schemes[j] = strictjson.Member{Key: m.Key, Val: strictjson.ObjectValue(strictjson.Member{Key: "list", Val: m.Val})}
		}
		out[i] = strictjson.ObjectValue(strictjson.Member{Key: "schemes", Val: strictjson.Value{Kind: strictjson.Object, Obj: schemes}})
	}
	return strictjson.Value{Kind: strictjson.Array, Arr: out}, nil
}

// v03Schemes maps a v0.3 security scheme `type` to its v1.0 wrapper member.
var v03Schemes = map[string]string{
	"apiKey":        "apiKeySecurityScheme",
	"http":          "httpAuthSecurityScheme",
	"oauth2":        "oauth2SecurityScheme",
	"openIdConnect": "openIdConnectSecurityScheme",
	"mutualTLS":     "mtlsSecurityScheme",
}

func (u *upgrader) securitySchemes(schemes strictjson.Value, p *strictjson.Path) (strictjson.Value, error) {
	if schemes.Kind != strictjson.Object {
		return schemes, nil // lint reports the type
	}
	out := make([]strictjson.Member, len(schemes.Obj))
	for i, m := range schemes.Obj {
		sp := p.Key(m.Key)
		out[i] = m
		typ, ok := m.Val.Get("type")
		if !ok {
			continue // already a v1.0 wrapper (the proto-JSON drift of v0.3)
		}
		if typ.Kind != strictjson.String {
			return strictjson.Value{}, typeError(sp.Key("type"), typ, "a string")
		}
		wrapper, known := v03Schemes[typ.Str]
		if !known {
			return strictjson.Value{}, v03Error(sp.Key("type"), "unsupported v0.3 security scheme type %s (want apiKey, http, oauth2, openIdConnect or mutualTLS)", strictjson.QuoteForMessage(typ.Str))
		}
		if typ.Str == "apiKey" {
			if err := conflict(m.Val, sp, "in", "location"); err != nil {
				return strictjson.Value{}, err
			}
		}
		inner := make([]strictjson.Member, 0, len(m.Val.Obj))
		for _, f := range m.Val.Obj {
			switch {
			case f.Key == "type":
				continue
			case f.Key == "in" && typ.Str == "apiKey":
				f.Key = "location"
			case f.Key == "flows" && typ.Str == "oauth2":
				flows, err := u.flows(f.Val, sp.Key("flows"))
				if err != nil {
					return strictjson.Value{}, err
				}
				f.Val = flows
			}
			inner = append(inner, f)
		}
		out[i] = strictjson.Member{Key: m.Key, Val: strictjson.ObjectValue(strictjson.Member{Key: wrapper, Val: strictjson.Value{Kind: strictjson.Object, Obj: inner}})}
		u.note(sp, "type %s became %s", strictjson.QuoteForMessage(typ.Str), wrapper)
	}
	return strictjson.Value{Kind: strictjson.Object, Obj: out}, nil
}

// v03Flows is the order in which the SDKs pick the one v1.0 flow.
var v03Flows = []string{"authorizationCode", "clientCredentials", "implicit", "password"}

func (u *upgrader) flows(flows strictjson.Value, p *strictjson.Path) (strictjson.Value, error) {
	if flows.Kind != strictjson.Object {
		return strictjson.Value{}, typeError(p, flows, "an object (OAuthFlows)")
	}
	for _, name := range v03Flows {
		f, ok := flows.Get(name)
		if !ok {
			continue
		}
		for _, m := range flows.Obj {
			if m.Key != name {
				u.note(p.Key(m.Key), "dropped: a v1.0 OAuthFlows holds one flow, and %s comes first", name)
			}
		}
		return strictjson.ObjectValue(strictjson.Member{Key: name, Val: f}), nil
	}
	return strictjson.Value{}, v03Error(p, "OAuth flows must declare at least one of authorizationCode, clientCredentials, implicit, password")
}

// Mapping names one way of reading a v0.3 card as v1.0. The shipped SDKs map
// a v0.3 card as Upgrade does but for the protocolVersion of each interface
// (DESIGN.md §3), so a signature one of them made over its own reading
// covers bytes that cardsign's reading does not have; a verifier of a v0.3
// card accepts each reading.
type Mapping string

const (
	// MappingCardsign is Upgrade's reading: protocolVersion "0.3" on every
	// interface.
	MappingCardsign Mapping = "cardsign"
	// MappingPython is a2a-python's (≤ 1.1 at least): the card's own
	// protocolVersion ("0.3.0") on every interface.
	MappingPython Mapping = "a2a-python"
	// MappingJS is @a2a-js/sdk's (compat/v0_3 toCoreAgentCard): the card's
	// own protocolVersion on the first interface, "0.3" on the others.
	MappingJS Mapping = "@a2a-js/sdk"
)

// Reading is a card as one mapping reads it, in the v1.0 shape.
type Reading struct {
	Mapping Mapping // empty for a v1.0 card, which needs no mapping
	Value   strictjson.Value
}

// Readings returns the distinct v1.0 readings of a loaded card: its Value
// alone for a v1.0 card; for a v0.3 card, cardsign's reading first, then
// a2a-python's and @a2a-js/sdk's where they differ from every reading
// before them (a card whose protocolVersion is "0.3" or absent has one).
func (l *Loaded) Readings() []Reading {
	if l.Shape != V03 {
		return []Reading{{Value: l.Value}}
	}
	out := []Reading{{Mapping: MappingCardsign, Value: l.Value}}
	own := l.protocolVersion
	if own == "" || own == V03 {
		return out
	}
	ifaces, _ := l.Value.Get("supportedInterfaces")
	out = append(out, Reading{Mapping: MappingPython, Value: withInterfaceVersions(l.Value, own, own)})
	if len(ifaces.Arr) > 1 {
		out = append(out, Reading{Mapping: MappingJS, Value: withInterfaceVersions(l.Value, own, V03)})
	}
	return out
}

// Reading returns the reading of mapping m; a mapping that reads the card
// as an earlier one does falls back to it (@a2a-js/sdk to a2a-python's, a
// one-interface card; both to cardsign's).
func (l *Loaded) Reading(m Mapping) Reading {
	rs := l.Readings()
	for _, want := range []Mapping{m, MappingPython, MappingCardsign} {
		if m == MappingCardsign && want == MappingPython {
			continue
		}
		for _, r := range rs {
			if r.Mapping == want {
				return r
			}
		}
	}
	return rs[0]
}

// withInterfaceVersions returns card v (as Upgrade made it) with
// protocolVersion first on its first interface and rest on the others.
func withInterfaceVersions(v strictjson.Value, first, rest string) strictjson.Value {
	ifaces, ok := v.Get("supportedInterfaces")
	if !ok || ifaces.Kind != strictjson.Array {
		return v
	}
	out := make([]strictjson.Value, len(ifaces.Arr))
	for i, iface := range ifaces.Arr {
		pv := rest
		if i == 0 {
			pv = first
		}
		out[i] = iface
		if iface.Kind == strictjson.Object {
			out[i] = iface.With("protocolVersion", strictjson.StringValue(pv))
		}
	}
	return v.With("supportedInterfaces", strictjson.Value{Kind: strictjson.Array, Arr: out})
}

// Describe says, for a person, how mapping m reads a v0.3 card.
func (m Mapping) Describe() string {
	switch m {
	case MappingCardsign:
		return `v0.3 card read as cardsign maps it (protocolVersion "0.3" on every interface)`
	case MappingPython:
		return "v0.3 card read as a2a-python maps it (the card's own protocolVersion on every interface)"
	case MappingJS:
		return `v0.3 card read as @a2a-js/sdk maps it (the card's own protocolVersion on the first interface, "0.3" on the others)`
	}
	return ""
}
