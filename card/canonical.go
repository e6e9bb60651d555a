package card

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cardsign/cardsign/strictjson"
)

// Profile selects which canonical bytes a signature covers.
type Profile string

const (
	// ProfileSpec is A2A v1.0 §8.4.1 to the letter: the presence rules of
	// the v1.0 schema, signatures excluded, then RFC 8785.
	ProfileSpec Profile = "spec"
	// ProfileSDK is what the shipped verifiers (@a2a-js/sdk, a2a-python)
	// compute: the same presence rules, keys outside the v1.0 schema
	// dropped, then every empty string, array, object and null removed
	// recursively, then RFC 8785.
	ProfileSDK Profile = "sdk"
	// ProfilePythonASCII is what a2a-python up to 1.1 computes: the sdk
	// profile's tree written by Python's json.dumps (ensure_ascii, keys in
	// code point order, Struct numbers as Python floats), not RFC 8785.
	ProfilePythonASCII Profile = "python-ascii"
)

// Profiles lists every profile, spec first.
func Profiles() []Profile { return []Profile{ProfileSpec, ProfileSDK, ProfilePythonASCII} }

// ParseProfile reads a profile name.
func ParseProfile(s string) (Profile, error) {
	switch Profile(s) {
	case ProfileSpec, ProfileSDK, ProfilePythonASCII:
		return Profile(s), nil
	}
	return "", fmt.Errorf("unknown canonical profile %q (want spec, sdk or python-ascii)", s)
}

// Canonical returns the canonical bytes of v, a card in the v1.0 shape,
// under profile p. It fails with a *strictjson.Error when a field has the wrong JSON
// type: presence rules are defined over typed fields.
func Canonical(v strictjson.Value, p Profile) ([]byte, error) {
	switch p {
	case ProfileSpec, ProfileSDK, ProfilePythonASCII:
		// One walk writes the spec bytes, and says whether the other
		// profiles would write the same.
		if spec, clean, ok := canonicalSpec(v); ok && (clean || p == ProfileSpec) {
			return spec, nil
		}
	}
	return canonicalProjected(v, p)
}

// canonicalProjected is the canonical form computed the general way: project
// the profile's tree, then write it.
func canonicalProjected(v strictjson.Value, p Profile) ([]byte, error) {
	t, _, err := project(v, p)
	if err != nil {
		return nil, err
	}
	if p == ProfilePythonASCII {
		return encodePython(t), nil
	}
	return t.JCS()
}

// Forms are the canonical forms of a card.
type Forms struct {
	Spec, SDK []byte
	// Python is the python-ascii form; it is the SDK bytes (the same
	// slice) when PythonDivergences is empty.
	Python []byte
	// PythonDivergences lists what a2a-python ≤ 1.1 writes otherwise than
	// RFC 8785 in the sdk tree: non-ASCII text, numbers, key order.
	PythonDivergences []string
	// Unknown lists the keys outside the v1.0 schema: the spec profile
	// keeps them, the sdk profile drops them.
	Unknown []string
	// Divergences lists where the two part ways: the empty values ("", [],
	// {}, null) that §8.4.1 keeps and the shipped verifiers drop, and the
	// keys outside the v1.0 schema that only the spec profile keeps.
	Divergences []string
	// JSResolver is what @a2a-js/sdk computes for a card its own resolver
	// (DefaultAgentCardResolver) fetched: the sdk bytes without
	// securitySchemes, which the resolver's conversion to its internal
	// type loses before verifyAgentCardSignature converts it again
	// (a2a-js#663). It is the SDK slice when the card has no schemes to
	// lose. No signature is made over it: it leaves the schemes unsigned.
	JSResolver []byte
}

// Same reports whether one signature serves both profiles.
func (f *Forms) Same() bool { return len(f.Divergences) == 0 }

// CanonicalForms computes the canonical forms of v. One walk writes the spec
// bytes straight from v and tells whether the sdk and python-ascii profiles
// would write the very same bytes (no empty value, no key outside the
// schema, no oneof with two members, no "__proto__" name, no number, only
// printable ASCII): then the three forms are one slice, and that is most
// cards. Otherwise the profiles are projected apart and compared.
func CanonicalForms(v strictjson.Value) (*Forms, error) {
	f, err := canonicalForms(v)
	if err != nil {
		return nil, err
	}
	// The sdk bytes of a card without securitySchemes are its sdk bytes
	// without that top-level member: no other member's projection depends
	// on it. Cut out of the bytes, it costs no second canonicalization.
	f.JSResolver = withoutTopMember(f.SDK, `"securitySchemes":`)
	return f, nil
}

// withoutTopMember returns canonical JSON object text without the top-level
// member whose name, quoted and followed by a colon, is name; canon itself
// when it has none. canon is RFC 8785 output: no whitespace, and a quote
// inside a string is always escaped.
func withoutTopMember(canon []byte, name string) []byte {
	depth, start := 0, -1
	for i := 0; i < len(canon); i++ {
		switch c := canon[i]; c {
		case '"':
			if depth == 1 && start < 0 && (canon[i-1] == '{' || canon[i-1] == ',') && bytes.HasPrefix(canon[i:], []byte(name)) {
				start = i
			}
			i = stringEnd(canon, i)
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		if start < 0 || depth != 1 || i+1 >= len(canon) || (canon[i+1] != ',' && canon[i+1] != '}') || i < start+len(name) {
			continue
		}
		// canon[start:i+1] is the member.
		out := make([]byte, 0, len(canon)-(i+1-start))
		switch {
		case canon[i+1] == ',':
			out = append(append(out, canon[:start]...), canon[i+2:]...) // drop the member and the comma after it
		case canon[start-1] == ',':
			out = append(append(out, canon[:start-1]...), canon[i+1:]...) // the last member: drop the comma before it
		default:
			out = append(append(out, canon[:start]...), canon[i+1:]...) // the only member
		}
		return out
	}
	return canon
}

// stringEnd returns the index of the quote that closes the string opened
// at canon[open], or len(canon): the next quote not escaped, found with
// bytes.IndexByte rather than byte by byte (descriptions make up most of a
// card). A quote is escaped when an odd run of backslashes precedes it.
func stringEnd(canon []byte, open int) int {
	for i := open + 1; ; {
		j := bytes.IndexByte(canon[i:], '"')
		if j < 0 {
			return len(canon)
		}
		i += j
		n := 0
		for k := i - 1; k > open && canon[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i
		}
		i++
	}
}

func canonicalForms(v strictjson.Value) (*Forms, error) {
	spec, clean, ok := canonicalSpec(v)
	if ok && clean {
		return &Forms{Spec: spec, SDK: spec, Python: spec}, nil
	}
	t, unknown, err := project(v, ProfileSpec)
	if err != nil {
		return nil, err
	}
	f := &Forms{Unknown: unknown, Divergences: append([]string(nil), unknown...)}
	var el divergenceList
	empties(t, strictjson.Root(), unknown, &el)
	f.Divergences = append(f.Divergences, el.list()...)
	if ok {
		f.Spec = spec
	} else if f.Spec, err = t.JCS(); err != nil {
		return nil, err
	}
	pr := projector{dropUnknown: true}
	sdk, err := pr.sdk(v)
	if err != nil {
		return nil, err
	}
	f.Divergences = append(f.Divergences, pr.dropped...)
	if f.SDK, err = sdk.JCS(); err != nil {
		return nil, err
	}
	if bytes.Equal(f.SDK, f.Spec) {
		f.SDK = f.Spec
	}
	// Where nothing is written otherwise, the python-ascii bytes are the
	// sdk bytes by construction: only ASCII text, no numbers, one key order.
	var pd divergenceList
	pythonDivergences(sdk, strictjson.Root(), &pd)
	f.PythonDivergences = pd.list()
	f.Python = f.SDK
	if len(f.PythonDivergences) > 0 {
		f.Python = encodePython(sdk)
	}
	return f, nil
}

// empties lists the path of every empty value ("", [], {}, null) in t, the
// first few by name and the rest by count: a card of thousands of empty
// strings must not cost a string per value. unknown are the keys outside
// the schema, listed already.
func empties(v strictjson.Value, p *strictjson.Path, unknown []string, out *divergenceList) {
	if v.IsEmpty() {
		out.addPath(p, "")
		return
	}
	switch v.Kind {
	case strictjson.Object:
		for _, m := range v.Obj {
			if m.Key == "__proto__" {
				// cleanEmpty drops it whatever it holds; in a message it
				// is also a key outside the schema, listed already.
				if at := p.Key(m.Key).String(); !slices.Contains(unknown, at) {
					out.add(at + ` (a "__proto__" key)`)
				}
				continue
			}
			empties(m.Val, p.Key(m.Key), unknown, out)
		}
	case strictjson.Array:
		for i, e := range v.Arr {
			switch {
			case e.IsEmpty():
				out.addPath(p.Index(i), "")
			case e.Kind == strictjson.Object || e.Kind == strictjson.Array:
				empties(e, p.Index(i), unknown, out)
			}
		}
	}
}

// project is Project, also returning the paths of keys outside the schema
// that the projection kept (spec profile) or dropped (sdk profile).
func project(v strictjson.Value, p Profile) (strictjson.Value, []string, error) {
	switch p {
	case ProfileSpec, ProfileSDK:
	case ProfilePythonASCII:
		p = ProfileSDK // the same tree, written otherwise
	default:
		return strictjson.Value{}, nil, fmt.Errorf("card: unknown canonical profile %q", p)
	}
	if v.Kind != strictjson.Object {
		return strictjson.Value{}, nil, &strictjson.Error{Path: "$", Rule: strictjson.RuleNotObject, Offset: -1, Reason: "an Agent Card is a JSON object, not " + v.Kind.String()}
	}
	pr := projector{dropUnknown: p == ProfileSDK}
	if p == ProfileSDK {
		t, err := pr.sdk(v)
		return t, pr.unknown, err
	}
	t, err := pr.presence(v, cardSchema, true)
	if err != nil {
		return strictjson.Value{}, nil, err
	}
	return t, pr.unknown, nil
}

// sdk is the sdk profile's tree of card v (an object); pr.dropUnknown is set.
func (pr *projector) sdk(v strictjson.Value) (strictjson.Value, error) {
	if v.Kind != strictjson.Object {
		return strictjson.Value{}, &strictjson.Error{Path: "$", Rule: strictjson.RuleNotObject, Offset: -1, Reason: "an Agent Card is a JSON object, not " + v.Kind.String()}
	}
	t, err := pr.presence(v, cardSchema, true)
	if err != nil {
		return strictjson.Value{}, err
	}
	t = dropEmpty(t)
	if t.Kind == strictjson.Null {
		t = strictjson.Value{Kind: strictjson.Object, Obj: []strictjson.Member{}}
	}
	return t, nil
}

type projector struct {
	dropUnknown bool
	unknown     []string
	// dropped lists the oneof members the sdk profile drops because an
	// earlier member of their group is set.
	dropped []string
	path    strictjson.PathStack
}

// presence returns object v, a message m, with §8.4.1 rule 1 applied to each
// member: REQUIRED fields stay whatever they hold; `optional` scalars,
// singular messages and oneof members stay because they are present;
// other scalars, repeated fields and maps go when they hold their default.
// Keys outside the schema stay unless pr.dropUnknown: the spec leaves them
// unspecified, the SDKs drop them.
func (pr *projector) presence(v strictjson.Value, m *message, top bool) (strictjson.Value, error) {
	out := make([]strictjson.Member, 0, len(v.Obj))
	for _, mem := range v.Obj {
		if top && mem.Key == "signatures" {
			continue
		}
		pr.path.PushKey(mem.Key)
		name, f := pr.resolve(v, m, mem.Key)
		var keep bool
		var val strictjson.Value
		var err error
		switch {
		case f == nil:
			pr.unknown = append(pr.unknown, pr.path.String())
			keep, val = !pr.dropUnknown, mem.Val
		case pr.dropUnknown && f.oneof != "" && pr.shadowed(v, m, f):
			// The SDKs read the first member of a oneof, in declaration
			// order, and ignore the rest.
			keep = false
			pr.dropped = append(pr.dropped, pr.path.String()+" (a second member of its oneof)")
		default:
			keep, val, err = pr.member(f, mem.Val)
		}
		pr.path.Pop()
		if err != nil {
			return strictjson.Value{}, err
		}
		if keep {
			out = append(out, strictjson.Member{Key: name, Val: val})
		}
	}
	return strictjson.Value{Kind: strictjson.Object, Obj: out}, nil
}

// resolve finds the schema field of member key of object v (message m). The
// sdk profile also reads a proto field name (icon_url) as its JSON name
// (iconUrl) when the JSON name is absent, as ProtoJSON readers such as
// @a2a-js/sdk's fromJSON do; the spec profile treats it as an unknown key.
func (pr *projector) resolve(v strictjson.Value, m *message, key string) (string, *field) {
	if f := m.field(key); f != nil {
		return key, f
	}
	if !pr.dropUnknown {
		return key, nil
	}
	if alias := camelCase(key); alias != key && !v.Has(alias) {
		if f := m.field(alias); f != nil {
			return alias, f
		}
	}
	return key, nil
}

// shadowed reports whether oneof member f of object v is preceded, in the
// declaration order of m, by another member of its group that v sets under
// either of its names.
func (pr *projector) shadowed(v strictjson.Value, m *message, f *field) bool {
	for i := range m.fields {
		g := &m.fields[i]
		if g == f {
			return false
		}
		if g.oneof == f.oneof && (v.Has(g.name) || v.Has(protoName(g.name))) {
			return true
		}
	}
	return false
}

// protoName turns a JSON name (iconUrl) into its proto field name (icon_url).
func protoName(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			b = append(b, '_', c+'a'-'A')
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

// member applies the presence rule of field f to its value; pr.path points
// at it.
func (pr *projector) member(f *field, val strictjson.Value) (keep bool, _ strictjson.Value, err error) {
	if ok, want := fits(f, val); !ok {
		return false, strictjson.Value{}, typeError(pr.path, val, want)
	}
	explicit := f.required || f.optional || f.oneof != ""
	switch f.kind {
	case kindString:
		return explicit || val.Str != "", val, nil
	case kindBool:
		return explicit || val.Bool, val, nil
	case kindMessage:
		sub, err := pr.presence(val, f.msg, false)
		return err == nil, sub, err
	case kindStruct:
		return true, val, nil // free-form: no presence rules inside
	case kindStrings, kindStringMap:
		if !f.required && len(val.Arr)+len(val.Obj) == 0 {
			return false, val, nil
		}
		return true, val, pr.checkElems(f, val)
	case kindMessages:
		if !f.required && len(val.Arr) == 0 {
			return false, val, nil
		}
		elems := make([]strictjson.Value, len(val.Arr))
		for i, e := range val.Arr {
			pr.path.PushIndex(i)
			if ok, want := elemFits(f, e); !ok {
				return false, strictjson.Value{}, typeError(pr.path, e, want)
			}
			if elems[i], err = pr.presence(e, f.msg, false); err != nil {
				return false, strictjson.Value{}, err
			}
			pr.path.Pop()
		}
		return true, strictjson.Value{Kind: strictjson.Array, Arr: elems}, nil
	case kindMessageMap:
		if !f.required && len(val.Obj) == 0 {
			return false, val, nil
		}
		entries := make([]strictjson.Member, len(val.Obj))
		for i, e := range val.Obj {
			pr.path.PushKey(e.Key)
			if ok, want := elemFits(f, e.Val); !ok {
				return false, strictjson.Value{}, typeError(pr.path, e.Val, want)
			}
			sub, err := pr.presence(e.Val, f.msg, false)
			if err != nil {
				return false, strictjson.Value{}, err
			}
			entries[i] = strictjson.Member{Key: e.Key, Val: sub}
			pr.path.Pop()
		}
		return true, strictjson.Value{Kind: strictjson.Object, Obj: entries}, nil
	}
	return true, val, nil
}

func (pr *projector) checkElems(f *field, v strictjson.Value) error {
	for i, e := range v.Arr {
		if ok, want := elemFits(f, e); !ok {
			pr.path.PushIndex(i)
			return typeError(pr.path, e, want)
		}
	}
	for _, e := range v.Obj {
		if ok, want := elemFits(f, e.Val); !ok {
			pr.path.PushKey(e.Key)
			return typeError(pr.path, e.Val, want)
		}
	}
	return nil
}

// dropEmpty removes, depth first, every null, "", [] and {} from v, the way
// the shipped verifiers' cleanEmpty does: an object or array that only held
// empties becomes empty and goes too. It returns a Null value when v itself
// ends up empty. A "__proto__" member goes too: cleanEmpty rebuilds every
// object by assignment, where that key sets the prototype, not a member.
func dropEmpty(v strictjson.Value) strictjson.Value {
	switch v.Kind {
	case strictjson.Object:
		out := make([]strictjson.Member, 0, len(v.Obj))
		for _, m := range v.Obj {
			if m.Key == "__proto__" {
				continue
			}
			if c := dropEmpty(m.Val); c.Kind != strictjson.Null {
				out = append(out, strictjson.Member{Key: m.Key, Val: c})
			}
		}
		if len(out) == 0 {
			return strictjson.Value{}
		}
		return strictjson.Value{Kind: strictjson.Object, Obj: out}
	case strictjson.Array:
		out := make([]strictjson.Value, 0, len(v.Arr))
		for _, e := range v.Arr {
			if c := dropEmpty(e); c.Kind != strictjson.Null {
				out = append(out, c)
			}
		}
		if len(out) == 0 {
			return strictjson.Value{}
		}
		return strictjson.Value{Kind: strictjson.Array, Arr: out}
	case strictjson.String:
		if v.Str == "" {
			return strictjson.Value{}
		}
	}
	return v
}
