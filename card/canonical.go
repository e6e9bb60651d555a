package card

import (
	"fmt"

	"github.com/gowebpki/jcs"
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
)

// Profiles lists every profile, spec first.
func Profiles() []Profile { return []Profile{ProfileSpec, ProfileSDK} }

// ParseProfile reads a profile name.
func ParseProfile(s string) (Profile, error) {
	switch Profile(s) {
	case ProfileSpec, ProfileSDK:
		return Profile(s), nil
	}
	return "", fmt.Errorf("unknown canonical profile %q (want spec or sdk)", s)
}

// Canonical returns the canonical bytes of v, a card in the v1.0 shape,
// under profile p. It fails with an *Error when a field has the wrong JSON
// type: presence rules are defined over typed fields.
func Canonical(v Value, p Profile) ([]byte, error) {
	t, err := Project(v, p)
	if err != nil {
		return nil, err
	}
	out, err := jcs.Transform(t.Compact())
	if err != nil {
		// Project only emits what Parse accepted; jcs failing here is a bug.
		return nil, fmt.Errorf("card: RFC 8785 transform: %w", err)
	}
	return out, nil
}

// Project applies the presence rules of profile p to v and returns the value
// whose RFC 8785 form is the canonical payload.
func Project(v Value, p Profile) (Value, error) {
	if p != ProfileSpec && p != ProfileSDK {
		return Value{}, fmt.Errorf("card: unknown canonical profile %q", p)
	}
	if v.Kind != Object {
		return Value{}, &Error{Path: "$", Rule: RuleNotObject, Offset: -1, Reason: "an Agent Card is a JSON object, not " + v.Kind.String()}
	}
	root := &Path{index: -1}
	t, err := presence(v, cardSchema, p == ProfileSDK, root, true)
	if err != nil {
		return Value{}, err
	}
	if p == ProfileSDK {
		t = dropEmpty(t)
		if t.Kind == Null {
			t = Value{Kind: Object, Obj: []Member{}}
		}
	}
	return t, nil
}

// presence returns object v, a message m, with §8.4.1 rule 1 applied to each
// member: REQUIRED fields stay whatever they hold; `optional` scalars,
// singular messages and oneof members stay because they are present;
// other scalars, repeated fields and maps go when they hold their default.
// Keys outside the schema stay unless dropUnknown: the spec leaves them
// unspecified, the SDKs drop them.
func presence(v Value, m *message, dropUnknown bool, p *Path, top bool) (Value, error) {
	out := make([]Member, 0, len(v.Obj))
	for _, mem := range v.Obj {
		if top && mem.Key == "signatures" {
			continue
		}
		f := m.field(mem.Key)
		if f == nil {
			if !dropUnknown {
				out = append(out, mem)
			}
			continue
		}
		fp := p.Key(mem.Key)
		if ok, want := fits(f, mem.Val); !ok {
			return Value{}, typeError(fp, mem.Val, want)
		}
		explicit := f.required || f.optional || f.oneof != ""
		val := mem.Val
		switch f.kind {
		case kindString:
			if !explicit && val.Str == "" {
				continue
			}
		case kindBool:
			if !explicit && !val.Bool {
				continue
			}
		case kindMessage:
			sub, err := presence(val, f.msg, dropUnknown, fp, false)
			if err != nil {
				return Value{}, err
			}
			val = sub
		case kindStruct:
			// Free-form: no presence rules inside.
		case kindStrings, kindStringMap:
			if !f.required && len(val.Arr)+len(val.Obj) == 0 {
				continue
			}
			if err := checkElems(f, val, fp); err != nil {
				return Value{}, err
			}
		case kindMessages:
			if !f.required && len(val.Arr) == 0 {
				continue
			}
			elems := make([]Value, len(val.Arr))
			for i, e := range val.Arr {
				ep := fp.Index(i)
				if ok, want := elemFits(f, e); !ok {
					return Value{}, typeError(ep, e, want)
				}
				sub, err := presence(e, f.msg, dropUnknown, ep, false)
				if err != nil {
					return Value{}, err
				}
				elems[i] = sub
			}
			val = Value{Kind: Array, Arr: elems}
		case kindMessageMap:
			if !f.required && len(val.Obj) == 0 {
				continue
			}
			entries := make([]Member, len(val.Obj))
			for i, e := range val.Obj {
				ep := fp.Key(e.Key)
				if ok, want := elemFits(f, e.Val); !ok {
					return Value{}, typeError(ep, e.Val, want)
				}
				sub, err := presence(e.Val, f.msg, dropUnknown, ep, false)
				if err != nil {
					return Value{}, err
				}
				entries[i] = Member{Key: e.Key, Val: sub}
			}
			val = Value{Kind: Object, Obj: entries}
		}
		out = append(out, Member{Key: mem.Key, Val: val})
	}
	return Value{Kind: Object, Obj: out}, nil
}

func checkElems(f *field, v Value, p *Path) error {
	for i, e := range v.Arr {
		if ok, want := elemFits(f, e); !ok {
			return typeError(p.Index(i), e, want)
		}
	}
	for _, e := range v.Obj {
		if ok, want := elemFits(f, e.Val); !ok {
			return typeError(p.Key(e.Key), e.Val, want)
		}
	}
	return nil
}

// dropEmpty removes, depth first, every null, "", [] and {} from v, the way
// the shipped verifiers' cleanEmpty does: an object or array that only held
// empties becomes empty and goes too. It returns a Null value when v itself
// ends up empty.
func dropEmpty(v Value) Value {
	switch v.Kind {
	case Object:
		out := make([]Member, 0, len(v.Obj))
		for _, m := range v.Obj {
			if c := dropEmpty(m.Val); c.Kind != Null {
				out = append(out, Member{Key: m.Key, Val: c})
			}
		}
		if len(out) == 0 {
			return Value{}
		}
		return Value{Kind: Object, Obj: out}
	case Array:
		out := make([]Value, 0, len(v.Arr))
		for _, e := range v.Arr {
			if c := dropEmpty(e); c.Kind != Null {
				out = append(out, c)
			}
		}
		if len(out) == 0 {
			return Value{}
		}
		return Value{Kind: Array, Arr: out}
	case String:
		if v.Str == "" {
			return Value{}
		}
	}
	return v
}
