package card

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/cardsign/cardsign/strictjson"
	"github.com/gowebpki/jcs"
)

// a2a-python up to 1.1 does not use RFC 8785. Its canonical bytes are
// json.dumps(cleaned MessageToDict(card), sort_keys=True,
// separators=(",", ":")) over the same tree as the sdk profile, which
// differs from RFC 8785 in three ways, all reproduced here:
//   - ensure_ascii: every character outside U+0020..U+007E is escaped,
//     \uXXXX in lowercase hex (astral characters as a surrogate pair), with
//     the short escapes \b \f \n \r \t;
//   - numbers, which a card holds only inside google.protobuf.Struct values
//     (extension params), are doubles printed by Python's repr(float);
//   - keys sort by code point, not by UTF-16 code unit.

// encodePython writes t, an sdk-profile tree, as a2a-python ≤ 1.1 does.
func encodePython(t strictjson.Value) []byte {
	return appendPython(make([]byte, 0, 1024), t)
}

func appendPython(b []byte, v strictjson.Value) []byte {
	switch v.Kind {
	case strictjson.Null, strictjson.Bool:
		return v.AppendCompact(b) // written alike by every profile
	case strictjson.Number:
		return append(b, pythonFloat(v.Str)...)
	case strictjson.String:
		return appendASCIIString(b, v.Str)
	case strictjson.Array:
		b = append(b, '[')
		for i, e := range v.Arr {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPython(b, e)
		}
		return append(b, ']')
	case strictjson.Object:
		members := slices.Clone(v.Obj)
		// Go compares strings by UTF-8 bytes, which is code point order:
		// Python's str order.
		slices.SortFunc(members, func(x, y strictjson.Member) int { return strings.Compare(x.Key, y.Key) })
		b = append(b, '{')
		for i, m := range members {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendASCIIString(b, m.Key)
			b = append(b, ':')
			b = appendPython(b, m.Val)
		}
		return append(b, '}')
	}
	return b
}

// appendASCIIString writes s as Python's json.dumps with ensure_ascii.
func appendASCIIString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\b':
			b = append(b, '\\', 'b')
		case r == '\f':
			b = append(b, '\\', 'f')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r >= 0x20 && r <= 0x7e:
			b = append(b, byte(r))
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			b = appendU(appendU(b, hi), lo)
		default:
			b = appendU(b, r)
		}
	}
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

func appendU(b []byte, r rune) []byte {
	return append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// pythonFloat prints a JSON number literal the way a2a-python ≤ 1.1 does:
// Python's json reads it (an integer literal as an int, so "-0" loses its
// sign), protobuf stores it in a double, and repr prints the double.
func pythonFloat(lit string) string {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return lit // Parse admits only numbers that fit a double
	}
	if f == 0 && !strings.ContainsAny(lit, ".eE") {
		f = 0 // the integer -0 is Python's int 0
	}
	return pyRepr(f)
}

// pyRepr is Python's float.__repr__: the shortest digits that round-trip,
// positional when the decimal exponent is in [-4, 16), else scientific with
// a signed exponent of at least two digits; always a ".0" or an exponent.
func pyRepr(f float64) string {
	// 'e' with precision -1 gives the shortest round-trip digits.
	e := strconv.FormatFloat(f, 'e', -1, 64) // "-1.2345e+17"
	neg := strings.HasPrefix(e, "-")
	e = strings.TrimPrefix(e, "-")
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	decpt := x + 1 // digits[:decpt] is the integer part
	var s string
	switch {
	case decpt <= -4 || decpt > 16:
		s = digits[:1]
		if len(digits) > 1 {
			s += "." + digits[1:]
		}
		sign := "+"
		if x < 0 {
			sign, x = "-", -x
		}
		s += fmt.Sprintf("e%s%02d", sign, x)
	case decpt <= 0:
		s = "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= len(digits):
		s = digits + strings.Repeat("0", decpt-len(digits)) + ".0"
	default:
		s = digits[:decpt] + "." + digits[decpt:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// pythonDivergences lists where a2a-python ≤ 1.1's bytes for t, an
// sdk-profile tree, differ from RFC 8785's: strings and keys with characters
// outside printable ASCII, numbers Python prints otherwise, and objects
// whose keys sort otherwise by code point than by UTF-16 code unit. When
// there are none, the two encodings are the same bytes.
func pythonDivergences(t strictjson.Value, p *strictjson.Path, out *divergenceList) {
	switch t.Kind {
	case strictjson.String:
		if !printableASCII(t.Str) {
			out.addPath(p, " (non-ASCII text)")
		}
	case strictjson.Number:
		if py := pythonFloat(t.Str); py != jcsNumber(t.Str) {
			out.addPath(p, fmt.Sprintf(" (number %s, which a2a-python writes %s)", t.Str, py))
		}
	case strictjson.Array:
		for i, e := range t.Arr {
			// A plain ASCII string, the common element, needs no path.
			if e.Kind != strictjson.String || !printableASCII(e.Str) {
				pythonDivergences(e, p.Index(i), out)
			}
		}
	case strictjson.Object:
		for _, m := range t.Obj {
			if !printableASCII(m.Key) {
				out.addPath(p.Key(m.Key), " (non-ASCII key)")
			}
		}
		if !sameKeyOrder(t.Obj) {
			out.addPath(p, " (keys that sort differently by code point and by UTF-16)")
		}
		for _, m := range t.Obj {
			pythonDivergences(m.Val, p.Key(m.Key), out)
		}
	}
}

// printableASCII reports whether Python's ensure_ascii and RFC 8785 write s
// alike: no character above U+007E (RFC 8785 writes them raw) and no DEL.
// Controls below U+0020 are escaped alike by both.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// maxPythonDivergences bounds a divergence list (python-ascii, and the
// empty values the sdk profile drops): a card of non-ASCII text or of empty
// strings would otherwise name every one of its strings.
const maxPythonDivergences = 20

// divergenceList keeps the first maxPythonDivergences entries and counts the
// rest.
type divergenceList struct {
	items []string
	more  int
}

func (d *divergenceList) add(s string) {
	if len(d.items) < maxPythonDivergences {
		d.items = append(d.items, s)
		return
	}
	d.more++
}

// addPath adds p's text and suffix, building the text only when the entry
// is kept.
func (d *divergenceList) addPath(p *strictjson.Path, suffix string) {
	if len(d.items) < maxPythonDivergences {
		d.items = append(d.items, p.String()+suffix)
		return
	}
	d.more++
}

func (d *divergenceList) list() []string {
	if d.more == 0 {
		return d.items
	}
	return append(d.items, fmt.Sprintf("and %d more", d.more))
}

// jcsNumber is the RFC 8785 form of a number literal.
func jcsNumber(lit string) string {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return lit
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return lit
	}
	return s
}

// sameKeyOrder reports whether sorting members by code point and by UTF-16
// code unit gives the same order (it does unless keys mix characters above
// U+FFFF with characters in U+E000..U+FFFF).
func sameKeyOrder(ms []strictjson.Member) bool {
	astral, high := false, false
	for _, m := range ms {
		for _, r := range m.Key {
			astral = astral || r > 0xffff
			high = high || (r >= 0xe000 && r <= 0xffff)
		}
	}
	if !astral || !high {
		return true
	}
	byPoint := slices.Clone(ms)
	slices.SortFunc(byPoint, func(x, y strictjson.Member) int { return strings.Compare(x.Key, y.Key) })
	byUnit := slices.Clone(ms)
	slices.SortFunc(byUnit, func(x, y strictjson.Member) int {
		return slices.Compare(utf16.Encode([]rune(x.Key)), utf16.Encode([]rune(y.Key)))
	})
	for i := range byPoint {
		if byPoint[i].Key != byUnit[i].Key {
			return false
		}
	}
	return true
}
