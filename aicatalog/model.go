package aicatalog

import (
	"github.com/cardsign/cardsign/strictjson"
)

// The documents cardsign writes, as Go values. Reading goes through
// strictjson's tree instead (Verify), so that unknown members a producer
// added stay in the payload a signature covers.

// Subject is the artifact release a signed Trust Manifest binds.
type Subject struct {
	Identifier, Type string
	// Digest ("sha256:" + hex) and URL: at least one; both when both are
	// on the entry. Version only when the entry has one.
	Digest, URL, Version string
}

// Provenance is one lineage link of a manifest: relation (e.g.
// RelationPublishedFrom) and the source's id (e.g. a repository URL).
type Provenance struct {
	Relation, SourceID string
}

// Manifest is an unsigned Trust Manifest.
type Manifest struct {
	Contributor string
	Subject     Subject
	Provenance  []Provenance
	// Extensions are the contributor's own claims, signed with the
	// manifest; keys are URLs or reverse-DNS names.
	Extensions []strictjson.Member
}

// Value is m as a JSON object, members in the order the specification
// lists them.
func (m Manifest) Value() strictjson.Value {
	v := strictjson.ObjectValue(
		strictjson.Member{Key: "contributor", Val: strictjson.StringValue(m.Contributor)},
		strictjson.Member{Key: "subject", Val: m.Subject.Value()},
	)
	if len(m.Provenance) > 0 {
		arr := strictjson.ArrayValue()
		for _, p := range m.Provenance {
			arr.Arr = append(arr.Arr, strictjson.ObjectValue(
				strictjson.Member{Key: "relation", Val: strictjson.StringValue(p.Relation)},
				strictjson.Member{Key: "sourceId", Val: strictjson.StringValue(p.SourceID)},
			))
		}
		v.Obj = append(v.Obj, strictjson.Member{Key: "provenance", Val: arr})
	}
	if len(m.Extensions) > 0 {
		v.Obj = append(v.Obj, strictjson.Member{Key: "extensions", Val: strictjson.ObjectValue(m.Extensions...)})
	}
	return v
}

// Value is s as a JSON object.
func (s Subject) Value() strictjson.Value {
	v := strictjson.ObjectValue(
		strictjson.Member{Key: "identifier", Val: strictjson.StringValue(s.Identifier)},
		strictjson.Member{Key: "type", Val: strictjson.StringValue(s.Type)},
	)
	for _, m := range []struct{ k, v string }{{"digest", s.Digest}, {"url", s.URL}, {"version", s.Version}} {
		if m.v != "" {
			v.Obj = append(v.Obj, strictjson.Member{Key: m.k, Val: strictjson.StringValue(m.v)})
		}
	}
	return v
}

// Publisher is an entry's publisher (not covered by manifest signatures;
// the catalog signature covers it).
type Publisher struct {
	Identifier, DisplayName, IdentityType string
}

// Entry is one catalog entry. Exactly one of URL and Data is set.
type Entry struct {
	Identifier, Type string
	URL              string
	Data             *strictjson.Value
	Digest           string
	Version          string
	UpdatedAt        string // RFC 3339
	Publisher        *Publisher
	// TrustManifests are signed manifests (Signed.Value).
	TrustManifests []strictjson.Value
}

// Value is e as a JSON object.
func (e Entry) Value() strictjson.Value {
	str := func(k, s string) strictjson.Member { return strictjson.Member{Key: k, Val: strictjson.StringValue(s)} }
	v := strictjson.ObjectValue(str("identifier", e.Identifier), str("type", e.Type))
	if e.Data != nil {
		v.Obj = append(v.Obj, strictjson.Member{Key: "data", Val: *e.Data})
	} else {
		v.Obj = append(v.Obj, str("url", e.URL))
	}
	for _, m := range []struct{ k, v string }{{"version", e.Version}, {"digest", e.Digest}, {"updatedAt", e.UpdatedAt}} {
		if m.v != "" {
			v.Obj = append(v.Obj, str(m.k, m.v))
		}
	}
	if p := e.Publisher; p != nil {
		pv := strictjson.ObjectValue(str("identifier", p.Identifier), str("displayName", p.DisplayName))
		if p.IdentityType != "" {
			pv.Obj = append(pv.Obj, str("identityType", p.IdentityType))
		}
		v.Obj = append(v.Obj, strictjson.Member{Key: "publisher", Val: pv})
	}
	if len(e.TrustManifests) > 0 {
		v.Obj = append(v.Obj, strictjson.Member{Key: "trustManifests", Val: strictjson.ArrayValue(e.TrustManifests...)})
	}
	return v
}

// Host is the catalog's operator.
type Host struct {
	DisplayName, Identifier string
}

// Catalog is an unsigned catalog document.
type Catalog struct {
	Host    Host
	Entries []Entry
	// Extensions are the operator's namespaced members, covered by the
	// catalog signature.
	Extensions []strictjson.Member
}

// Value is c as a JSON object (specVersion SpecVersion).
func (c Catalog) Value() strictjson.Value {
	host := strictjson.ObjectValue(strictjson.Member{Key: "displayName", Val: strictjson.StringValue(c.Host.DisplayName)})
	if c.Host.Identifier != "" {
		host.Obj = append(host.Obj, strictjson.Member{Key: "identifier", Val: strictjson.StringValue(c.Host.Identifier)})
	}
	entries := strictjson.Value{Kind: strictjson.Array, Arr: make([]strictjson.Value, 0, len(c.Entries))}
	for _, e := range c.Entries {
		entries.Arr = append(entries.Arr, e.Value())
	}
	v := strictjson.ObjectValue(
		strictjson.Member{Key: "specVersion", Val: strictjson.StringValue(SpecVersion)},
		strictjson.Member{Key: "host", Val: host},
		strictjson.Member{Key: "entries", Val: entries},
	)
	if len(c.Extensions) > 0 {
		v.Obj = append(v.Obj, strictjson.Member{Key: "extensions", Val: strictjson.ObjectValue(c.Extensions...)})
	}
	return v
}
