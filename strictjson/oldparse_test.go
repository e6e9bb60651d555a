package strictjson

// The parser as it stood before it read strings as substrings of one copy of
// the input and kept containers in slabs (commit e159769), kept as the
// oracle of FuzzParseDifferential: the new parser must accept exactly what
// it accepted, yield the same values, and refuse the rest with the same
// path, rule, reason and offset.

import (
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

func oldParseAs(data []byte, lim Limits, noun, wantObject string) (Value, error) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxBytes {
		return Value{}, &Error{Path: "$", Rule: RuleSize, Offset: -1,
			Reason: noun + " is " + strconv.Itoa(len(data)) + " bytes, more than the limit of " + strconv.Itoa(lim.MaxBytes)}
	}
	p := oldParser{data: data, maxDepth: lim.MaxDepth, maxValues: lim.MaxValues, maxItems: lim.MaxItems}
	p.skipSpace()
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		return Value{}, p.fail(RuleSyntax, "byte order mark before the JSON text; save the file as UTF-8 without BOM")
	}
	v, err := p.value()
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return Value{}, p.fail(RuleTrailingData, "data after the end of the JSON object")
	}
	if v.Kind != Object {
		return Value{}, &Error{Path: "$", Rule: RuleNotObject, Offset: 0, Reason: wantObject + ", not " + v.Kind.String()}
	}
	return v, nil
}

type oldParser struct {
	data     []byte
	pos      int
	maxDepth int
	stack    PathStack // path to the value being parsed, for errors
	// values counts the values read so far, against maxValues.
	values, maxValues, maxItems int
	// elems and members hold the items of the arrays and objects being
	// read, one stack for all of them: each is copied out at its end into a
	// slice of its exact length, so a large array costs its own size once
	// instead of the sum of every size append grew it through.
	elems   []Value
	members []Member
}

func (p *oldParser) fail(rule, format string, args ...any) *Error {
	return &Error{Path: p.stack.String(), Rule: rule, Offset: p.pos, Reason: fmt.Sprintf(format, args...)}
}

func (p *oldParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *oldParser) value() (Value, error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return Value{}, p.fail(RuleSyntax, "unexpected end of input, expected a value")
	}
	if p.values++; p.values > p.maxValues {
		return Value{}, p.fail(RuleMaxValues, "more than %d JSON values in the document (objects, arrays, strings, numbers, booleans and nulls each count); a real Agent Card holds a few thousand (raise signing.max_card_values, or cardsign --max-values, only for a card expected to hold more)", p.maxValues)
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		return Value{Kind: String, Str: s}, err
	case c == 't':
		return Value{Kind: Bool, Bool: true}, p.literal("true")
	case c == 'f':
		return Value{Kind: Bool}, p.literal("false")
	case c == 'n':
		return Value{}, p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return Value{}, p.unexpected("a value")
	}
}

func (p *oldParser) unexpected(want string) *Error {
	c := p.data[p.pos]
	if c >= 0x80 {
		r, _ := utf8.DecodeRune(p.data[p.pos:])
		if r == utf8.RuneError {
			return p.fail(RuleUTF8, "invalid UTF-8 byte 0x%02x", c)
		}
		return p.fail(RuleSyntax, "unexpected %q, expected %s", r, want)
	}
	return p.fail(RuleSyntax, "unexpected %q, expected %s", c, want)
}

func (p *oldParser) literal(word string) error {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return p.fail(RuleSyntax, "invalid literal, expected %s", word)
	}
	p.pos += len(word)
	return nil
}

func (p *oldParser) enter() error {
	if len(p.stack) >= p.maxDepth {
		return p.fail(RuleDepth, "nesting deeper than the limit of %d", p.maxDepth)
	}
	return nil
}

func (p *oldParser) object() (Value, error) {
	// The top-level object is depth 1: its members sit one segment deep.
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	p.pos++ // '{'
	base := len(p.members)
	defer func() { p.members = p.members[:base] }()
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return Value{Kind: Object, Obj: []Member{}}, nil
	}
	var seen map[string]struct{} // only for large objects; small ones scan
	for {
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.fail(RuleSyntax, "unexpected end of input inside an object")
		}
		if p.data[p.pos] != '"' {
			return Value{}, p.unexpected("a member name in double quotes")
		}
		keyPos := p.pos
		key, err := p.str()
		if err != nil {
			return Value{}, err
		}
		members := p.members[base:]
		if len(members) >= 16 && seen == nil {
			seen = make(map[string]struct{}, 2*len(members))
			for _, m := range members {
				seen[m.Key] = struct{}{}
			}
		}
		dup := false
		if seen != nil {
			_, dup = seen[key]
			seen[key] = struct{}{}
		} else {
			for i := range members {
				if members[i].Key == key {
					dup = true
					break
				}
			}
		}
		if dup {
			p.stack = append(p.stack, segment{key: key, index: -1})
			p.pos = keyPos
			return Value{}, p.fail(RuleDuplicateKey, "member %q appears more than once in the object", key)
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			if p.pos >= len(p.data) {
				return Value{}, p.fail(RuleSyntax, "unexpected end of input, expected ':'")
			}
			return Value{}, p.unexpected("':' after a member name")
		}
		p.pos++
		v, err := p.element(segment{key: key, index: -1})
		if err != nil {
			return Value{}, err
		}
		p.members = append(p.members, Member{Key: key, Val: v})
		more, err := p.more('}', "object")
		if err != nil {
			return Value{}, err
		}
		if !more {
			return Value{Kind: Object, Obj: slices.Clone(p.members[base:])}, nil
		}
	}
}

func (p *oldParser) array() (Value, error) {
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return Value{Kind: Array, Arr: []Value{}}, nil
	}
	base := len(p.elems)
	defer func() { p.elems = p.elems[:base] }()
	for {
		n := len(p.elems) - base
		if n >= p.maxItems {
			return Value{}, p.fail(RuleMaxItems, "array has more than %d items, the limit for one array of a card (an Agent Card needs far fewer: shorten the array)", p.maxItems)
		}
		v, err := p.element(segment{index: n})
		if err != nil {
			return Value{}, err
		}
		p.elems = append(p.elems, v)
		more, err := p.more(']', "array")
		if err != nil {
			return Value{}, err
		}
		if !more {
			return Value{Kind: Array, Arr: slices.Clone(p.elems[base:])}, nil
		}
	}
}

// element parses the value at seg below the current path.
func (p *oldParser) element(seg segment) (Value, error) {
	p.stack = append(p.stack, seg)
	v, err := p.value()
	if err != nil {
		return Value{}, err
	}
	p.stack = p.stack[:len(p.stack)-1]
	return v, nil
}

// more reads what follows an item of an array or a member of an object
// (what): ',' means another comes, closing ends the container.
func (p *oldParser) more(closing byte, what string) (bool, error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return false, p.fail(RuleSyntax, "unexpected end of input inside an %s", what)
	}
	switch p.data[p.pos] {
	case ',':
		p.pos++
		return true, nil
	case closing:
		p.pos++
		return false, nil
	}
	return false, p.unexpected("',' or '" + string(closing) + "'")
}

// str reads a string literal starting at the opening quote.
func (p *oldParser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes, so the text is the bytes as they stand.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := p.data[start:p.pos]
			if !utf8.Valid(s) {
				return "", p.badUTF8(start)
			}
			p.pos++
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.fail(RuleSyntax, "control character 0x%02x inside a string must be escaped", c)
		}
		p.pos++
	}
	if p.pos >= len(p.data) {
		return "", p.fail(RuleSyntax, "unterminated string")
	}
	if !utf8.Valid(p.data[start:p.pos]) {
		return "", p.badUTF8(start)
	}
	buf := make([]byte, 0, p.pos-start+16)
	buf = append(buf, p.data[start:p.pos]...)
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c == '\\':
			if err := p.escape(&buf); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", p.fail(RuleSyntax, "control character 0x%02x inside a string must be escaped", c)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.fail(RuleUTF8, "invalid UTF-8 byte 0x%02x in a string", c)
			}
			buf = append(buf, p.data[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
	return "", p.fail(RuleSyntax, "unterminated string")
}

func (p *oldParser) badUTF8(from int) *Error {
	for i := from; i < len(p.data); {
		r, size := utf8.DecodeRune(p.data[i:])
		if r == utf8.RuneError && size <= 1 {
			p.pos = i
			return p.fail(RuleUTF8, "invalid UTF-8 byte 0x%02x in a string", p.data[i])
		}
		i += size
	}
	return p.fail(RuleUTF8, "invalid UTF-8 in a string")
}

func (p *oldParser) escape(buf *[]byte) error {
	if p.pos+1 >= len(p.data) {
		return p.fail(RuleSyntax, "unterminated escape sequence")
	}
	c := p.data[p.pos+1]
	var out byte
	switch c {
	case '"', '\\', '/':
		out = c
	case 'b':
		out = '\b'
	case 'f':
		out = '\f'
	case 'n':
		out = '\n'
	case 'r':
		out = '\r'
	case 't':
		out = '\t'
	case 'u':
		r, err := p.hex4(p.pos + 2)
		if err != nil {
			return err
		}
		at := p.pos
		p.pos += 6
		if utf16.IsSurrogate(r) {
			if r >= 0xDC00 {
				p.pos = at
				return p.fail(RuleSurrogate, "lone low surrogate \\u%04X (it has no high surrogate before it)", r)
			}
			if p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
				p.pos = at
				return p.fail(RuleSurrogate, "lone high surrogate \\u%04X (no low surrogate follows)", r)
			}
			r2, err := p.hex4(p.pos + 2)
			if err != nil {
				return err
			}
			if r2 < 0xDC00 || r2 > 0xDFFF {
				p.pos = at
				return p.fail(RuleSurrogate, "lone high surrogate \\u%04X (followed by \\u%04X)", r, r2)
			}
			r = utf16.DecodeRune(r, r2)
			p.pos += 6
		}
		*buf = utf8.AppendRune(*buf, r)
		return nil
	default:
		return p.fail(RuleSyntax, "invalid escape sequence \\%c", c)
	}
	*buf = append(*buf, out)
	p.pos += 2
	return nil
}

func (p *oldParser) hex4(at int) (rune, error) {
	if at+4 > len(p.data) {
		return 0, p.fail(RuleSyntax, "truncated \\u escape")
	}
	var r rune
	for _, c := range p.data[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, p.fail(RuleSyntax, "invalid hex digit %q in a \\u escape", c)
		}
	}
	return r, nil
}

// number reads an RFC 8259 number and checks that it is a finite IEEE-754
// double that does not silently round to zero: RFC 8785 (and every verifier)
// reads numbers as doubles, so a literal outside that range would be signed
// as a different number than the one the author wrote.
func (p *oldParser) number() (Value, error) {
	start := p.pos
	d := p.data
	i := p.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
		if i < len(d) && d[i] >= '0' && d[i] <= '9' {
			p.pos = i
			return Value{}, p.fail(RuleSyntax, "invalid number: leading zeros are not allowed")
		}
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		p.pos = i
		return Value{}, p.fail(RuleSyntax, "invalid number: a digit must follow '-'")
	}
	nonZero := false
	for _, c := range d[start:i] {
		if c >= '1' && c <= '9' {
			nonZero = true
		}
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			p.pos = i
			return Value{}, p.fail(RuleSyntax, "invalid number: a digit must follow '.'")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			if d[i] != '0' {
				nonZero = true
			}
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			p.pos = i
			return Value{}, p.fail(RuleSyntax, "invalid number: a digit must follow the exponent")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	lit := string(d[start:i])
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return Value{}, p.fail(RuleNumberRange, "number %s is outside the range of an IEEE-754 double", abbreviate(lit))
	}
	if f == 0 && nonZero {
		return Value{}, p.fail(RuleNumberRange, "number %s is too small for an IEEE-754 double (it would become 0)", abbreviate(lit))
	}
	p.pos = i
	return Value{Kind: Number, Str: lit}, nil
}
