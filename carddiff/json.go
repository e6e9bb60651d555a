package carddiff

import (
	"fmt"

	"github.com/cardsign/cardsign/strictjson"
)

// MaxJSONBytes bounds what Parse reads: a diff is stored with an approval.
const MaxJSONBytes = 256 << 10

// field is one fact: its name (the cel tag) and where it lives.
type field struct {
	name string
	list *[]string
	flag *bool
	text *string
}

// fields are d's facts in their encoding order.
func (d *Diff) fields() []field {
	return []field{
		{name: "first", flag: &d.First},
		{name: "changed", list: &d.Changed},
		{name: "hosts_added", list: &d.HostsAdded},
		{name: "hosts_removed", list: &d.HostsRemoved},
		{name: "interfaces_added", list: &d.InterfacesAdded},
		{name: "interfaces_removed", list: &d.InterfacesRemoved},
		{name: "interfaces_changed", flag: &d.InterfacesChanged},
		{name: "security_schemes_added", list: &d.SecuritySchemesAdded},
		{name: "security_schemes_removed", list: &d.SecuritySchemesRemoved},
		{name: "security_schemes_changed", list: &d.SecuritySchemesChanged},
		{name: "security_requirements_changed", flag: &d.SecurityRequirementsChanged},
		{name: "oauth_flows_added", list: &d.OAuthFlowsAdded},
		{name: "oauth_flows_removed", list: &d.OAuthFlowsRemoved},
		{name: "scopes_added", list: &d.ScopesAdded},
		{name: "scopes_removed", list: &d.ScopesRemoved},
		{name: "skills_added", list: &d.SkillsAdded},
		{name: "skills_removed", list: &d.SkillsRemoved},
		{name: "skills_changed", list: &d.SkillsChanged},
		{name: "version_changed", flag: &d.VersionChanged},
		{name: "version", text: &d.Version},
		{name: "previous_version", text: &d.PreviousVersion},
		{name: "extended_card_changed", flag: &d.ExtendedCardChanged},
		{name: "name_changed", flag: &d.NameChanged},
	}
}

// lists are d's list facts.
func (d *Diff) lists() []field {
	var out []field
	for _, f := range d.fields() {
		if f.list != nil {
			out = append(out, f)
		}
	}
	return out
}

// MarshalJSON encodes d as one object with every fact, members in a fixed
// order, lists never null.
func (d Diff) MarshalJSON() ([]byte, error) {
	d.normalise()
	var obj []strictjson.Member
	for _, f := range d.fields() {
		var v strictjson.Value
		switch {
		case f.list != nil:
			v = strictjson.Value{Kind: strictjson.Array, Arr: []strictjson.Value{}}
			for _, s := range *f.list {
				v.Arr = append(v.Arr, strictjson.StringValue(s))
			}
		case f.flag != nil:
			v = strictjson.Value{Kind: strictjson.Bool, Bool: *f.flag}
		default:
			v = strictjson.StringValue(*f.text)
		}
		obj = append(obj, strictjson.Member{Key: f.name, Val: v})
	}
	return strictjson.ObjectValue(obj...).Compact(), nil
}

// Parse decodes what MarshalJSON wrote: strictly (one object, known
// members of the right types, no duplicates) and bounded.
func Parse(b []byte) (Diff, error) {
	v, err := strictjson.ParseAs(b, strictjson.Limits{MaxBytes: MaxJSONBytes, MaxDepth: 4}, "card diff", "an object of diff facts")
	if err != nil {
		return Diff{}, err
	}
	var d Diff
	byName := map[string]field{}
	for _, f := range d.fields() {
		byName[f.name] = f
	}
	for _, m := range v.Obj {
		f, ok := byName[m.Key]
		if !ok {
			return Diff{}, fmt.Errorf("card diff: unknown member %s", strictjson.QuoteForMessage(m.Key))
		}
		switch {
		case f.list != nil:
			if m.Val.Kind != strictjson.Array {
				return Diff{}, fmt.Errorf("card diff: %s is %s, want a list of strings", m.Key, m.Val.Kind)
			}
			for i, e := range m.Val.Arr {
				if e.Kind != strictjson.String {
					return Diff{}, fmt.Errorf("card diff: %s[%d] is %s, want a string", m.Key, i, e.Kind)
				}
				*f.list = append(*f.list, e.Str)
			}
		case f.flag != nil:
			if m.Val.Kind != strictjson.Bool {
				return Diff{}, fmt.Errorf("card diff: %s is %s, want true or false", m.Key, m.Val.Kind)
			}
			*f.flag = m.Val.Bool
		default:
			if m.Val.Kind != strictjson.String {
				return Diff{}, fmt.Errorf("card diff: %s is %s, want a string", m.Key, m.Val.Kind)
			}
			*f.text = m.Val.Str
		}
	}
	d.normalise()
	return d, nil
}
