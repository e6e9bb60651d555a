package card

import (
	"cmp"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// The RFC 8785 writer. It writes straight from a Value in one walk: members
// sorted by the UTF-16 code units of their names, strings escaped as
// ECMAScript's JSON.stringify does (\b \f \n \r \t \" \\ and \u00xx for the
// other controls, everything else literal UTF-8), numbers in the form of
// ECMAScript's Number.prototype.toString (jcs.NumberToJSON). gowebpki/jcs's
// Transform, which parses its input again, is kept as the oracle in tests
// (jcs_test.go, FuzzJCSDifferential) and is not on any production path.
//
// The same walk writes the spec canonical bytes of a card (canonicalSpec):
// it applies the §8.4.1 presence rules on the way and notes whether the sdk
// and python-ascii profiles would write the very same bytes, so that most
// cards get all three profiles from one walk.

// jcsWriter is one RFC 8785 walk.
type jcsWriter struct {
	buf []byte
	// order is scratch for sorting members, used as a stack: an object
	// pushes the indexes of its members, sorts them, writes, and pops.
	order []int32
	// bad is set when v cannot be written (a string or name that is not
	// valid UTF-8, a number that is not an RFC 8259 number a double holds,
	// a duplicate name, a card field of the wrong type); the caller then
	// finds the error, with its path, by a slower walk.
	bad bool
	// clean stays true while the sdk and python-ascii profiles would write
	// what was written: no empty value (null, "", [], {}), no number, no
	// character outside printable ASCII, no "__proto__" name, no key
	// outside the schema, no oneof with two members set.
	clean bool
}

func newJCSWriter(sizeHint int) *jcsWriter {
	return &jcsWriter{buf: make([]byte, 0, sizeHint), order: make([]int32, 0, 64), clean: true}
}

// JCS returns v in its RFC 8785 form: members sorted by UTF-16 code units, no
// whitespace, numbers in ECMAScript form, minimal string escaping. It is the
// one canonical writer: card signatures, JWK bytes (whose stability keeps
// JWKS ETags and RFC 7638 thumbprints fixed) and revocation documents all use
// it. A string that is not valid UTF-8 is refused with its path rather than
// written: encoding/json would replace it and sign other text than was given.
func (v Value) JCS() ([]byte, error) {
	w := newJCSWriter(256)
	w.value(v)
	if w.bad {
		return nil, jcsError(v)
	}
	return w.buf, nil
}

func (w *jcsWriter) value(v Value) {
	switch v.Kind {
	case Null:
		w.clean = false
		w.buf = append(w.buf, "null"...)
	case Bool:
		if v.Bool {
			w.buf = append(w.buf, "true"...)
		} else {
			w.buf = append(w.buf, "false"...)
		}
	case Number:
		w.clean = false
		var ok bool
		if w.buf, ok = appendJCSNumber(w.buf, v.Str); !ok {
			w.bad = true
		}
	case String:
		if v.Str == "" {
			w.clean = false
		}
		w.str(v.Str)
	case Array:
		if len(v.Arr) == 0 {
			w.clean = false
		}
		w.buf = append(w.buf, '[')
		for i, e := range v.Arr {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.value(e)
		}
		w.buf = append(w.buf, ']')
	case Object:
		if len(v.Obj) == 0 {
			w.clean = false
		}
		base := len(w.order)
		for i := range v.Obj {
			w.order = append(w.order, int32(i))
		}
		idx := w.sorted(v.Obj, base)
		w.buf = append(w.buf, '{')
		for n, i := range idx {
			if n > 0 {
				w.buf = append(w.buf, ',')
			}
			m := &v.Obj[i]
			w.name(m.Key)
			w.value(m.Val)
		}
		w.buf = append(w.buf, '}')
		w.order = w.order[:base]
	default:
		w.bad = true
	}
}

// sorted sorts w.order[base:], indexes into ms, by member name and returns
// it. Nested objects push above it, so the returned slice stays valid (if
// the stack grows, it keeps pointing at the old, unchanged array).
func (w *jcsWriter) sorted(ms []Member, base int) []int32 {
	idx := w.order[base:]
	if len(idx) > 1 {
		slices.SortFunc(idx, func(a, b int32) int { return compareUTF16(ms[a].Key, ms[b].Key) })
		for n := 1; n < len(idx); n++ {
			if ms[idx[n-1]].Key == ms[idx[n]].Key {
				w.bad = true // RFC 8785 has no form for duplicate names
			}
		}
	}
	return idx
}

// name writes a member name and the colon after it.
func (w *jcsWriter) name(k string) {
	if k == "__proto__" {
		w.clean = false // cleanEmpty drops it
	}
	w.str(k)
	w.buf = append(w.buf, ':')
}

// str writes a string; text outside printable ASCII is written as is (RFC
// 8785) but makes the python-ascii bytes differ.
func (w *jcsWriter) str(s string) {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x7f {
			w.clean = false
			if !utf8.ValidString(s[i:]) {
				w.bad = true
			}
			break
		}
	}
	w.buf = AppendString(w.buf, s)
}

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units, as
// RFC 8785 §3.2.3 sorts member names, without converting them. Byte order is
// code point order, which is UTF-16 order except where a character in
// U+E000..U+FFFF meets one above U+FFFF: the latter's first code unit is a
// surrogate (U+D800..U+DBFF), so it sorts first in UTF-16.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return cmp.Compare(a[i], b[i])
	}
	// The first difference may be inside a character: back up to its
	// start, which is common to both.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	if astralA, astralB := ra > 0xFFFF, rb > 0xFFFF; astralA != astralB {
		// One is a surrogate pair, the other one BMP code unit (never a
		// surrogate in valid UTF-8).
		if astralA {
			if rb >= 0xE000 {
				return -1
			}
			return 1
		}
		if ra >= 0xE000 {
			return 1
		}
		return -1
	}
	return cmp.Compare(ra, rb)
}

// appendJCSNumber writes the RFC 8785 form of the JSON number literal lit:
// the ECMAScript form of the double it denotes. Integer literals of up to 15
// digits are exact doubles below 1e21, which ECMAScript writes as plain
// digits, so they are copied ("-0" becomes "0"); anything else goes through
// strconv.ParseFloat and jcs.NumberToJSON. ok is false when lit is not an
// RFC 8259 number or is not finite as a double.
func appendJCSNumber(b []byte, lit string) ([]byte, bool) {
	digits := lit
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if n := len(digits); n > 0 && n <= 15 && (digits[0] != '0' || n == 1) && allDigits(digits) {
		if digits == "0" {
			return append(b, '0'), true
		}
		return append(b, lit...), true
	}
	if !isJSONNumber(lit) {
		return b, false
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return b, false
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return b, false
	}
	return append(b, s...), true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isJSONNumber reports whether s is an RFC 8259 number: strconv.ParseFloat
// also reads hex, "Inf", underscores and a leading '+'.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(s)
}

// jcsError finds, in document order, why v has no RFC 8785 form: the first
// name or string that is not valid UTF-8, number that is not one, or
// duplicate name.
func jcsError(v Value) error {
	if err := checkUTF8(v, &pathStack{}); err != nil {
		return err
	}
	if err := checkJCS(v, &pathStack{}); err != nil {
		return err
	}
	return &Error{Path: "$", Rule: RuleSyntax, Offset: -1, Reason: "no RFC 8785 form"}
}

func checkJCS(v Value, path *pathStack) error {
	switch v.Kind {
	case Null, Bool, String:
	case Number:
		if _, ok := appendJCSNumber(nil, v.Str); !ok {
			return &Error{Path: path.String(), Rule: RuleNumberRange, Offset: -1, Reason: "number " + abbreviate(strconv.Quote(v.Str)) + " is not a finite JSON number"}
		}
	case Array:
		for i, e := range v.Arr {
			path.pushIndex(i)
			if err := checkJCS(e, path); err != nil {
				return err
			}
			path.pop()
		}
	case Object:
		for i, m := range v.Obj {
			path.pushKey(m.Key)
			for _, o := range v.Obj[:i] {
				if o.Key == m.Key {
					return &Error{Path: path.String(), Rule: RuleDuplicateKey, Offset: -1, Reason: "member " + quoteForMessage(m.Key) + " appears more than once in the object"}
				}
			}
			if err := checkJCS(m.Val, path); err != nil {
				return err
			}
			path.pop()
		}
	default:
		return &Error{Path: path.String(), Rule: RuleSyntax, Offset: -1, Reason: "not a JSON value (kind " + strconv.Itoa(int(v.Kind)) + ")"}
	}
	return nil
}

// canonicalSpec writes the spec canonical bytes of card v in one walk: the
// §8.4.1 presence rules applied on the way, signatures left out, RFC 8785.
// ok is false when v has none (not an object, a field of the wrong type, a
// value RFC 8785 cannot write): project then finds the error with its path.
// clean says that the sdk and python-ascii profiles write the same bytes.
func canonicalSpec(v Value) (out []byte, clean, ok bool) {
	if v.Kind != Object {
		return nil, false, false
	}
	w := newJCSWriter(2048)
	w.message(v, cardSchema, true)
	if w.bad {
		return nil, false, false
	}
	return w.buf, w.clean, true
}

// message writes object v, a message m, keeping the members its presence
// rules keep (projector.presence and projector.member, in the spec profile).
func (w *jcsWriter) message(v Value, m *message, top bool) {
	base := len(w.order)
	var groups [4]string // oneof groups set, to see one set twice
	ng := 0
	for i := range v.Obj {
		mem := &v.Obj[i]
		if top && mem.Key == "signatures" {
			continue
		}
		f := m.field(mem.Key)
		if f == nil {
			w.clean = false // outside the schema: the sdk profile drops it
			w.order = append(w.order, int32(i))
			continue
		}
		if !kindFits(f, mem.Val) {
			w.bad = true
			w.order = w.order[:base]
			return
		}
		if f.oneof != "" {
			for _, g := range groups[:ng] {
				if g == f.oneof {
					w.clean = false // the sdk profile keeps the first only
				}
			}
			if ng < len(groups) {
				groups[ng] = f.oneof
				ng++
			} else {
				w.clean = false
			}
		}
		if kept(f, mem.Val) {
			w.order = append(w.order, int32(i))
		}
	}
	idx := w.sorted(v.Obj, base)
	if len(idx) == 0 {
		w.clean = false // {}: the sdk profile drops it
	}
	w.buf = append(w.buf, '{')
	for n, i := range idx {
		if n > 0 {
			w.buf = append(w.buf, ',')
		}
		mem := &v.Obj[i]
		w.name(mem.Key)
		if f := m.field(mem.Key); f != nil {
			w.field(f, mem.Val)
		} else {
			w.value(mem.Val)
		}
	}
	w.buf = append(w.buf, '}')
	w.order = w.order[:base]
}

// kindFits is fits without the description of what was wanted.
func kindFits(f *field, v Value) bool {
	switch f.kind {
	case kindString:
		return v.Kind == String
	case kindBool:
		return v.Kind == Bool
	case kindMessage, kindStruct, kindMessageMap, kindStringMap:
		return v.Kind == Object
	case kindStrings, kindMessages:
		return v.Kind == Array
	}
	return false
}

// kept is the presence rule of projector.member for a value that fits f.
func kept(f *field, v Value) bool {
	explicit := f.required || f.optional || f.oneof != ""
	switch f.kind {
	case kindString:
		return explicit || v.Str != ""
	case kindBool:
		return explicit || v.Bool
	case kindStrings, kindStringMap, kindMessages, kindMessageMap:
		return f.required || len(v.Arr)+len(v.Obj) > 0
	}
	return true
}

// field writes the value of a kept member of field f.
func (w *jcsWriter) field(f *field, v Value) {
	switch f.kind {
	case kindMessage:
		w.message(v, f.msg, false)
	case kindMessages:
		if len(v.Arr) == 0 {
			w.clean = false
		}
		w.buf = append(w.buf, '[')
		for i, e := range v.Arr {
			if e.Kind != Object {
				w.bad = true
				return
			}
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.message(e, f.msg, false)
		}
		w.buf = append(w.buf, ']')
	case kindMessageMap:
		if len(v.Obj) == 0 {
			w.clean = false
		}
		base := len(w.order)
		for i := range v.Obj {
			if v.Obj[i].Val.Kind != Object {
				w.bad = true
				w.order = w.order[:base]
				return
			}
			w.order = append(w.order, int32(i))
		}
		idx := w.sorted(v.Obj, base)
		w.buf = append(w.buf, '{')
		for n, i := range idx {
			if n > 0 {
				w.buf = append(w.buf, ',')
			}
			w.name(v.Obj[i].Key)
			w.message(v.Obj[i].Val, f.msg, false)
		}
		w.buf = append(w.buf, '}')
		w.order = w.order[:base]
	case kindStrings, kindStringMap:
		for _, e := range v.Arr {
			if e.Kind != String {
				w.bad = true
				return
			}
		}
		for _, e := range v.Obj {
			if e.Val.Kind != String {
				w.bad = true
				return
			}
		}
		w.value(v)
	default:
		w.value(v)
	}
}
