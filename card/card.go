// Package card knows the A2A Agent Card: it parses card JSON strictly, maps
// v0.3 cards to the v1.0 shape, lints them against the v1.0 schema, and
// computes the canonical bytes that signatures cover, in three profiles,
// because the shipped verifiers compute three different byte strings:
//
//   - spec: A2A v1.0 §8.4.1 to the letter (presence rules, then RFC 8785);
//   - sdk: what @a2a-js/sdk ≥ 1.3 and a2a-python ≥ 1.2 compute: the same
//     rules, keys outside the schema dropped, empty values removed
//     recursively, then RFC 8785; a card needs it when it holds empties;
//   - python-ascii: what a2a-python ≤ 1.1 computes: the sdk tree written by
//     Python's json.dumps (ensure_ascii, keys by code point, Struct numbers
//     as Python floats); a card needs it when it holds non-ASCII text,
//     numbers in params or keys that sort differently by code point.
//
// CanonicalForms computes all three and says where they part ways.
//
// Everything here is a plain function over bytes and values: no I/O, no
// keys, no transport.
package card

import "github.com/cardsign/cardsign/strictjson"

// Default caps on the values of a card, beyond strictjson's size and depth
// defaults. A real Agent Card is a few KiB; every JSON value costs a parsed
// Value and a step of lint and canonicalization however few bytes it takes
// in the card ("{}," is 3), so the size cap alone lets a 180 KiB card of
// 60,000 empty skills cost tens of MB per call. The value and item caps bound
// that work: a real card of 256 KiB holds about 9,000 values (a 200 KiB card
// of 278 full skills: 7,000).
const (
	DefaultMaxValues = 20000
	DefaultMaxItems  = 4096
)

// Parse reads one card strictly: strictjson.Parse, with the card caps
// (DefaultMaxValues, DefaultMaxItems) where lim leaves them zero and the
// refusals worded for an Agent Card.
func Parse(data []byte, lim strictjson.Limits) (strictjson.Value, error) {
	if lim.MaxValues <= 0 {
		lim.MaxValues = DefaultMaxValues
	}
	if lim.MaxItems <= 0 {
		lim.MaxItems = DefaultMaxItems
	}
	return strictjson.ParseAs(data, lim, "card", "an Agent Card is a JSON object")
}

// Options control Load.
type Options struct {
	Limits strictjson.Limits
	// StripUnknown removes keys outside the v1.0 schema instead of leaving
	// them for Lint to refuse.
	StripUnknown bool
}

// Loaded is a card read and brought to the v1.0 shape.
type Loaded struct {
	Value    strictjson.Value // the card in the v1.0 shape
	Shape    string           // V03 or V10: the shape the input had
	Notes    []Note           // what the v0.3 mapping changed
	Stripped []string         // paths removed by StripUnknown
	// protocolVersion is a v0.3 card's own protocolVersion, which the
	// shipped SDKs put in the interfaces where cardsign puts "0.3".
	protocolVersion string
}

// Load parses data strictly, maps a v0.3 card to v1.0, and strips unknown
// keys when asked. It does not lint: callers decide what findings mean.
func Load(data []byte, opts Options) (*Loaded, error) {
	v, err := Parse(data, opts.Limits)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Shape: V10}
	if IsV03(v) {
		l.Shape = V03
		if pv, _ := v.Get("protocolVersion"); pv.Kind == strictjson.String {
			l.protocolVersion = pv.Str
		}
	}
	if v, l.Notes, err = Upgrade(v); err != nil {
		return nil, err
	}
	if opts.StripUnknown {
		v, l.Stripped = StripUnknown(v)
	}
	l.Value = v
	return l, nil
}
