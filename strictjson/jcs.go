package strictjson

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
// The walk is exported as JCSWriter so that a schema-aware writer (card's
// spec canonical bytes) can drive it member by member, applying its presence
// rules on the way, and learn from Plain whether writers that drop empty
// values or escape non-ASCII text would have written the very same bytes.

// JCSWriter is one RFC 8785 walk. JCS drives it over a whole Value; a
// schema-aware writer drives it member by member: Delim for the structure,
// WriteName and WriteValue for members, Mark/Push/Sorted/Release to order
// the members it keeps.
type JCSWriter struct {
	buf []byte
	// order is scratch for sorting members, used as a stack: an object
	// pushes the indexes of its members, sorts them, writes, and pops.
	order []int32
	// bad is set when v cannot be written (a string or name that is not
	// valid UTF-8, a number that is not an RFC 8259 number a double holds,
	// a duplicate name, or what the driver refused with Fail); the caller
	// then finds the error, with its path, by a slower walk.
	bad bool
	// plain stays true while nothing written is where other JSON writers
	// part ways with RFC 8785: no empty value (null, "", [], {}), no
	// number, no character outside printable ASCII, no "__proto__" name,
	// nothing the driver flagged with NotPlain.
	plain bool
}

// NewJCSWriter starts a walk with room for sizeHint bytes of output.
func NewJCSWriter(sizeHint int) *JCSWriter {
	return &JCSWriter{buf: make([]byte, 0, sizeHint), order: make([]int32, 0, 64), plain: true}
}

// Result returns the bytes written; plain says that nothing written was an
// empty value, a number, text outside printable ASCII, a "__proto__" name
// or flagged with NotPlain; ok is false when something could not be written
// (out is then meaningless, and JCS of the same value says why).
func (w *JCSWriter) Result() (out []byte, plain, ok bool) { return w.buf, w.plain, !w.bad }

// Delim writes one structural character: { } [ ] , or :.
func (w *JCSWriter) Delim(c byte) { w.buf = append(w.buf, c) }

// Fail marks the walk as unwritable: the driver found a value its schema
// refuses.
func (w *JCSWriter) Fail() { w.bad = true }

// NotPlain records that the driver wrote or left out something that other
// writers treat differently (a member outside its schema, say).
func (w *JCSWriter) NotPlain() { w.plain = false }

// Mark returns the top of the member-order stack, for Push, Sorted and
// Release.
func (w *JCSWriter) Mark() int { return len(w.order) }

// Push adds member index i of the object being written above the mark.
func (w *JCSWriter) Push(i int) { w.order = append(w.order, int32(i)) }

// Release pops the member-order stack back to mark base.
func (w *JCSWriter) Release(base int) { w.order = w.order[:base] }

// JCS returns v in its RFC 8785 form: members sorted by UTF-16 code units, no
// whitespace, numbers in ECMAScript form, minimal string escaping. It is the
// one canonical writer: card signatures, JWK bytes (whose stability keeps
// JWKS ETags and RFC 7638 thumbprints fixed) and revocation documents all use
// it. A string that is not valid UTF-8 is refused with its path rather than
// written: encoding/json would replace it and sign other text than was given.
func (v Value) JCS() ([]byte, error) {
	n := compactSize(v)
	w := NewJCSWriter(n + n/16 + 16) // room for some escapes and number forms
	w.WriteValue(v)
	if w.bad {
		return nil, jcsError(v)
	}
	return w.buf, nil
}

// compactSize is the length of v written without whitespace, strings
// without escapes and numbers as their literals: about the length of its
// RFC 8785 form, found in a walk that writes nothing, so that JCS grows its
// buffer once instead of doubling it up from a guess.
func compactSize(v Value) int {
	switch v.Kind {
	case Null:
		return 4
	case Bool:
		return 5
	case Number:
		return len(v.Str)
	case String:
		return len(v.Str) + 2
	case Array:
		n := len(v.Arr) + 1 // brackets and commas
		for _, e := range v.Arr {
			n += compactSize(e)
		}
		return n
	case Object:
		n := 2*len(v.Obj) + 1 // braces, commas and colons
		for _, m := range v.Obj {
			n += len(m.Key) + 2 + compactSize(m.Val)
		}
		return n
	}
	return 0
}

// WriteValue writes v in its RFC 8785 form.
func (w *JCSWriter) WriteValue(v Value) {
	switch v.Kind {
	case Null:
		w.plain = false
		w.buf = append(w.buf, "null"...)
	case Bool:
		if v.Bool {
			w.buf = append(w.buf, "true"...)
		} else {
			w.buf = append(w.buf, "false"...)
		}
	case Number:
		w.plain = false
		var ok bool
		if w.buf, ok = appendJCSNumber(w.buf, v.Str); !ok {
			w.bad = true
		}
	case String:
		if v.Str == "" {
			w.plain = false
		}
		w.str(v.Str)
	case Array:
		if len(v.Arr) == 0 {
			w.plain = false
		}
		w.buf = append(w.buf, '[')
		for i, e := range v.Arr {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.WriteValue(e)
		}
		w.buf = append(w.buf, ']')
	case Object:
		if len(v.Obj) == 0 {
			w.plain = false
		}
		base := len(w.order)
		for i := range v.Obj {
			w.order = append(w.order, int32(i))
		}
		idx := w.Sorted(v.Obj, base)
		w.buf = append(w.buf, '{')
		for n, i := range idx {
			if n > 0 {
				w.buf = append(w.buf, ',')
			}
			m := &v.Obj[i]
			w.WriteName(m.Key)
			w.WriteValue(m.Val)
		}
		w.buf = append(w.buf, '}')
		w.order = w.order[:base]
	default:
		w.bad = true
	}
}

// Sorted sorts the member indexes pushed above mark base, indexes into ms,
// by member name (UTF-16 code units) and returns them; a duplicate name makes
// the walk unwritable. Nested objects push above it, so the returned slice stays valid (if
// the stack grows, it keeps pointing at the old, unchanged array).
func (w *JCSWriter) Sorted(ms []Member, base int) []int32 {
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

// WriteName writes a member name and the colon after it.
func (w *JCSWriter) WriteName(k string) {
	if k == "__proto__" {
		w.plain = false // empty-dropping canonicalizers drop it
	}
	w.str(k)
	w.buf = append(w.buf, ':')
}

// str writes a string; text outside printable ASCII is written as is (RFC
// 8785) but is not plain: an ASCII-escaping writer differs.
func (w *JCSWriter) str(s string) {
	// Find the first byte outside printable ASCII: a word at a time while
	// none has its high bit set or is 0x7f, then byte by byte.
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if x := load64(s, i); (x|hasByte(x, 0x7f))&highs != 0 {
			break
		}
	}
	for i < len(s) && s[i] < 0x7f {
		i++
	}
	if i < len(s) {
		w.plain = false
		if !utf8.ValidString(s[i:]) {
			w.bad = true
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
		i = skipDigits(s, i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return false // a fraction needs a digit
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return false // an exponent needs a digit
		}
		i = j
	}
	return i == len(s)
}

// skipDigits returns the index of the first byte at or after i in s that is
// not an ASCII digit.
func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// jcsError finds, in document order, why v has no RFC 8785 form: the first
// name or string that is not valid UTF-8, number that is not one, or
// duplicate name.
func jcsError(v Value) error {
	if err := checkUTF8(v, &PathStack{}); err != nil {
		return err
	}
	if err := checkJCS(v, &PathStack{}); err != nil {
		return err
	}
	return &Error{Path: "$", Rule: RuleSyntax, Offset: -1, Reason: "no RFC 8785 form"}
}

func checkJCS(v Value, path *PathStack) error {
	switch v.Kind {
	case Null, Bool, String:
	case Number:
		if _, ok := appendJCSNumber(nil, v.Str); !ok {
			return &Error{Path: path.String(), Rule: RuleNumberRange, Offset: -1, Reason: "number " + abbreviate(strconv.Quote(v.Str)) + " is not a finite JSON number"}
		}
	case Array:
		for i, e := range v.Arr {
			path.PushIndex(i)
			if err := checkJCS(e, path); err != nil {
				return err
			}
			path.Pop()
		}
	case Object:
		for i, m := range v.Obj {
			path.PushKey(m.Key)
			for _, o := range v.Obj[:i] {
				if o.Key == m.Key {
					return &Error{Path: path.String(), Rule: RuleDuplicateKey, Offset: -1, Reason: "member " + QuoteForMessage(m.Key) + " appears more than once in the object"}
				}
			}
			if err := checkJCS(m.Val, path); err != nil {
				return err
			}
			path.Pop()
		}
	default:
		return &Error{Path: path.String(), Rule: RuleSyntax, Offset: -1, Reason: "not a JSON value (kind " + strconv.Itoa(int(v.Kind)) + ")"}
	}
	return nil
}
