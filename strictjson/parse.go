package strictjson

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Default limits for Parse. Documents cardsign reads are a few KiB; the caps
// keep a hostile one from costing more than a bounded amount of work.
const (
	DefaultMaxBytes = 256 << 10
	DefaultMaxDepth = 64
)

// Limits bounds what Parse accepts. A zero MaxBytes or MaxDepth takes its
// default; a zero MaxValues or MaxItems means no cap beyond what MaxBytes
// implies (a JWK Set or a revocation document may legitimately hold many
// entries; card sets its own caps for cards).
type Limits struct {
	MaxBytes int // input size in bytes
	MaxDepth int // nesting of arrays and objects; the top-level object is depth 1
	// MaxValues caps the JSON values in the document: objects, arrays,
	// strings, numbers, booleans and nulls, the top-level object included.
	// Every value costs a parsed Value (72 bytes) and a step of every walk
	// however few bytes it takes ("{}," is 3), which the size cap alone
	// does not bound.
	MaxValues int
	// MaxItems caps the elements of any one array.
	MaxItems int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxValues <= 0 {
		l.MaxValues = math.MaxInt
	}
	if l.MaxItems <= 0 {
		l.MaxItems = math.MaxInt
	}
	return l
}

// Parse reads one JSON object strictly. Unlike encoding/json it refuses what
// would let two parties read different documents from the same bytes:
// duplicate keys, invalid UTF-8, lone surrogates (which decoders silently
// replace), numbers that do not fit an IEEE-754 double, and trailing data.
// Every refusal is an *Error naming the path and the rule. It is the one
// reader for every JSON document cardsign reads where two parsers must never
// disagree: cards, JWKs, JWK Sets, JWS headers and envelopes, revocation
// documents, log entries, OIDC tokens.
func Parse(data []byte, lim Limits) (Value, error) {
	return ParseAs(data, lim, "document", "want a JSON object")
}

// ParseAs is Parse with the size and not-object refusals worded for one kind
// of document: noun names it ("card is 300000 bytes, more than ..."), and
// wantObject says what it must be ("an Agent Card is a JSON object, not
// array"). The refusals, rules and paths are Parse's.
//
// The strings of the tree (member names, string values without escapes,
// number literals) are substrings of one copy of data, and the members and
// elements of its containers share a few backing arrays, so that a parse
// costs a handful of allocations instead of one per string and container: a
// Value kept from the tree keeps that copy (at most MaxBytes) alive.
func ParseAs(data []byte, lim Limits, noun, wantObject string) (Value, error) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxBytes {
		return Value{}, &Error{Path: "$", Rule: RuleSize, Offset: -1,
			Reason: noun + " is " + strconv.Itoa(len(data)) + " bytes, more than the limit of " + strconv.Itoa(lim.MaxBytes)}
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	p := parser{src: string(data), maxDepth: lim.MaxDepth, maxValues: lim.MaxValues, maxItems: lim.MaxItems, scratch: sc}
	// Every member has one ':' of its own and every array of n elements
	// n-1 ','s and one '[', so these counts bound the slabs' sizes; strings
	// holding ':' or ',' make them overcount, which slabChunk caps.
	p.memberSlab.left = min(bytes.Count(data, []byte{':'}), lim.MaxValues)
	p.elemSlab.left = min(bytes.Count(data, []byte{','})+bytes.Count(data, []byte{'['}), lim.MaxValues)
	p.skipSpace()
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		return Value{}, p.locate(p.fail(RuleSyntax, "byte order mark before the JSON text; save the file as UTF-8 without BOM"))
	}
	v, err := p.value()
	if err != nil {
		return Value{}, p.locate(err)
	}
	p.skipSpace()
	if p.pos != len(p.src) {
		return Value{}, p.locate(p.fail(RuleTrailingData, "data after the end of the JSON object"))
	}
	if v.Kind != Object {
		return Value{}, &Error{Path: "$", Rule: RuleNotObject, Offset: 0, Reason: wantObject + ", not " + v.Kind.String()}
	}
	return v, nil
}

type parser struct {
	src             string // the input, copied once: strings are substrings of it
	pos             int
	depth, maxDepth int // nesting of the container being read
	// errPath is the path of a refusal, built from the innermost segment
	// outwards as the refusal returns through the containers (locate), so
	// that reading a value costs no path bookkeeping.
	errPath []segment
	// values counts the values read so far, against maxValues.
	values, maxValues, maxItems int
	*scratch
	// The members and elements of every container are copied, at its end,
	// into a slice of its exact length cut from these.
	memberSlab slab[Member]
	elemSlab   slab[Value]
}

// scratch is what a parse needs only while it runs, reused from one parse to
// the next through scratchPool: the stacks below grow to the size of the
// documents read and would otherwise be grown again by every parse (17
// allocations for the sample card, four times what the parse itself needs).
type scratch struct {
	// elems and members hold the items of the arrays and objects being
	// read, one stack for all of them: each is copied out at its end into a
	// slice of its exact length, so a large array costs its own size once
	// instead of the sum of every size append grew it through.
	elems   []Value
	members []Member
	esc     []byte // the text of the string with escapes being read
}

// scratchPool keeps scratch between parses: a sync.Pool, not a field of a
// long-lived object, because every package parses through the free function
// Parse. It measurably helps: BenchmarkParse of the sample card takes 21
// allocations without it, 4 with it, and 1.36× the time without it.
var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooled is the largest stack worth keeping: a stack grown by a large
// JWK Set or revocation document goes to the garbage collector instead of
// holding its memory in the pool.
const maxPooled = 1024

// release clears what the stacks still reference (containers clear their
// items when they end, a failed parse leaves some) so that the pool keeps no
// document alive, and returns sc to the pool.
func (sc *scratch) release() {
	clear(sc.elems)
	clear(sc.members)
	if cap(sc.elems) > maxPooled || cap(sc.members) > maxPooled || cap(sc.esc) > maxPooled<<6 {
		return
	}
	sc.elems, sc.members, sc.esc = sc.elems[:0], sc.members[:0], sc.esc[:0]
	scratchPool.Put(sc)
}

// slabChunk is the most items a slab allocates at once beyond what one
// container needs: it bounds what a document whose strings are full of ':'
// and ',' makes the slabs overallocate.
const slabChunk = 512

// slab hands out exact-length slices of few backing arrays. left is an upper
// bound on the items still to come, so that a document that fits one chunk
// gets one array of about its own size.
type slab[T any] struct {
	buf  []T
	left int
}

// take returns a slice of n items whose capacity is n: an append by a
// caller reallocates instead of overwriting the next container's items.
func (s *slab[T]) take(n int) []T {
	if cap(s.buf)-len(s.buf) < n {
		s.buf = make([]T, 0, max(n, min(s.left, slabChunk)))
	}
	i := len(s.buf)
	s.buf = s.buf[:i+n]
	s.left -= n
	return s.buf[i : i+n : i+n]
}

// fail returns a refusal at p.pos; its path is set by locate.
// pop moves the items of a container that just ended, those of stack above
// base, into a slice of their own and clears them from the stack, which must
// keep no document alive in the pool.
func (s *slab[T]) pop(stack *[]T, base int) []T {
	items := (*stack)[base:]
	out := s.take(len(items))
	copy(out, items)
	clear(items)
	*stack = (*stack)[:base]
	return out
}

func (p *parser) fail(rule, format string, args ...any) *Error {
	return &Error{Rule: rule, Offset: p.pos, Reason: fmt.Sprintf(format, args...)}
}

// locate sets the path of a refusal that returned from the value being read,
// from the segments the containers it returned through added.
func (p *parser) locate(err error) error {
	if e, ok := err.(*Error); ok {
		slices.Reverse(p.errPath)
		e.Path = formatPath(p.errPath)
	}
	return err
}

// in records, for a refusal returning from the value at seg, that seg is on
// its path.
func (p *parser) in(seg segment, err error) error {
	p.errPath = append(p.errPath, seg)
	return err
}

func (p *parser) skipSpace() {
	s, i := p.src, p.pos
	for i < len(s) && s[i] <= ' ' && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r') {
		i++
	}
	p.pos = i
}

func (p *parser) value() (Value, error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return Value{}, p.fail(RuleSyntax, "unexpected end of input, expected a value")
	}
	if p.values++; p.values > p.maxValues {
		return Value{}, p.fail(RuleMaxValues, "more than %d JSON values in the document (objects, arrays, strings, numbers, booleans and nulls each count); a real Agent Card holds a few thousand (raise signing.max_card_values, or cardsign --max-values, only for a card expected to hold more)", p.maxValues)
	}
	switch c := p.src[p.pos]; {
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

func (p *parser) unexpected(want string) *Error {
	c := p.src[p.pos]
	if c >= 0x80 {
		r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError {
			return p.fail(RuleUTF8, "invalid UTF-8 byte 0x%02x", c)
		}
		return p.fail(RuleSyntax, "unexpected %q, expected %s", r, want)
	}
	return p.fail(RuleSyntax, "unexpected %q, expected %s", c, want)
}

func (p *parser) literal(word string) error {
	if len(p.src)-p.pos < len(word) || p.src[p.pos:p.pos+len(word)] != word {
		return p.fail(RuleSyntax, "invalid literal, expected %s", word)
	}
	p.pos += len(word)
	return nil
}

// enter goes one container deeper; the container calls leave at its end.
func (p *parser) enter() error {
	if p.depth >= p.maxDepth {
		return p.fail(RuleDepth, "nesting deeper than the limit of %d", p.maxDepth)
	}
	p.depth++
	return nil
}

func (p *parser) leave() { p.depth-- }

// smallObject is the most members whose names a new name is compared with
// one by one to find a duplicate; a larger object builds a set.
const smallObject = 16

func (p *parser) object() (Value, error) {
	// The top-level object is depth 1: its members sit one segment deep.
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		p.leave()
		return Value{Kind: Object, Obj: []Member{}}, nil
	}
	base := len(p.members)
	var seen map[string]struct{} // only for large objects; small ones scan
	for {
		p.skipSpace()
		if p.pos >= len(p.src) {
			return Value{}, p.fail(RuleSyntax, "unexpected end of input inside an object")
		}
		if p.src[p.pos] != '"' {
			return Value{}, p.unexpected("a member name in double quotes")
		}
		keyPos := p.pos
		key, err := p.str()
		if err != nil {
			return Value{}, err
		}
		members := p.members[base:]
		if len(members) >= smallObject && seen == nil {
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
			p.pos = keyPos
			return Value{}, p.in(segment{key: key, index: -1}, p.fail(RuleDuplicateKey, "member %q appears more than once in the object", key))
		}
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			if p.pos >= len(p.src) {
				return Value{}, p.fail(RuleSyntax, "unexpected end of input, expected ':'")
			}
			return Value{}, p.unexpected("':' after a member name")
		}
		p.pos++
		v, err := p.value()
		if err != nil {
			return Value{}, p.in(segment{key: key, index: -1}, err)
		}
		p.members = append(p.members, Member{Key: key, Val: v})
		more, err := p.more('}', "object")
		if err != nil {
			return Value{}, err
		}
		if !more {
			p.leave()
			return Value{Kind: Object, Obj: p.memberSlab.pop(&p.members, base)}, nil
		}
	}
}

func (p *parser) array() (Value, error) {
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		p.leave()
		return Value{Kind: Array, Arr: []Value{}}, nil
	}
	base := len(p.elems)
	for {
		n := len(p.elems) - base
		if n >= p.maxItems {
			return Value{}, p.fail(RuleMaxItems, "array has more than %d items, the limit for one array of a card (an Agent Card needs far fewer: shorten the array)", p.maxItems)
		}
		v, err := p.value()
		if err != nil {
			return Value{}, p.in(segment{index: n}, err)
		}
		p.elems = append(p.elems, v)
		more, err := p.more(']', "array")
		if err != nil {
			return Value{}, err
		}
		if !more {
			p.leave()
			return Value{Kind: Array, Arr: p.elemSlab.pop(&p.elems, base)}, nil
		}
	}
}

// more reads what follows an item of an array or a member of an object
// (what): ',' means another comes, closing ends the container.
func (p *parser) more(closing byte, what string) (bool, error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return false, p.fail(RuleSyntax, "unexpected end of input inside an %s", what)
	}
	switch p.src[p.pos] {
	case ',':
		p.pos++
		return true, nil
	case closing:
		p.pos++
		return false, nil
	}
	return false, p.unexpected("',' or '" + string(closing) + "'")
}

// plainByte marks the bytes a string may hold as they stand and that end no
// fast run: printable ASCII but '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipPlain returns the index of the first byte at or after i in s that is
// not plainByte, or len(s): eight bytes at a time.
func skipPlain(s string, i int) int {
	for i+8 <= len(s) {
		if m := lookMask(load64(s, i), true); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for i < len(s) && plainByte[s[i]] {
		i++
	}
	return i
}

// Bytes repeated in every byte of a word, for lookMask and hasByte.
const ones, highs = 0x0101010101010101, 0x8080808080808080

// lookMask sets the high bit of the first byte of the word x (read little
// endian) that is below 0x20, a '"' or a '\\', or, when nonASCII is set,
// 0x80 or above: a byte a string reader or writer must look at. It is zero
// when x holds none. Bits above the first may be set too (a borrow carries
// upwards), never below it: the lowest set bit is exact (Hacker's Delight,
// 6-1).
func lookMask(x uint64, nonASCII bool) uint64 {
	// (x - 0x20 in each byte) sets the high bit of a byte below 0x20 and
	// of bytes from 0xa0, which ^x clears.
	m := (x-ones*0x20)&^x | hasByte(x, '"') | hasByte(x, '\\')
	if nonASCII {
		m |= x
	}
	return m & highs
}

// hasByte has a high bit set in some byte when a byte of x is c.
func hasByte(x uint64, c byte) uint64 {
	y := x ^ (ones * uint64(c))
	return (y - ones) &^ y & highs
}

// load64 reads the eight bytes of s from i as one little-endian word (the
// compiler makes one load of it).
func load64(s string, i int) uint64 {
	w := s[i : i+8]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// str reads a string literal starting at the opening quote. A string without
// escapes is a substring of the input, with no copy.
func (p *parser) str() (string, error) {
	s := p.src
	start := p.pos + 1 // after the opening quote
	i := start
	ascii := true
	for {
		i = skipPlain(s, i)
		if i >= len(s) {
			p.pos = i
			return "", p.fail(RuleSyntax, "unterminated string")
		}
		c := s[i]
		switch {
		case c == '"':
			if !ascii && !utf8.ValidString(s[start:i]) {
				return "", p.badUTF8(start)
			}
			p.pos = i + 1
			return s[start:i], nil
		case c == '\\':
			if !ascii && !utf8.ValidString(s[start:i]) {
				return "", p.badUTF8(start)
			}
			p.pos = i
			return p.escaped(start)
		case c < 0x20:
			p.pos = i
			return "", p.fail(RuleSyntax, "control character 0x%02x inside a string must be escaped", c)
		}
		ascii = false // c >= 0x80: checked as UTF-8 at the end of the run
		i++
	}
}

// escaped reads the rest of a string from its first escape at p.pos, start
// being where its text begins; the text before p.pos is valid UTF-8.
func (p *parser) escaped(start int) (string, error) {
	s := p.src
	buf := append(p.esc[:0], s[start:p.pos]...)
	defer func() { p.esc = buf[:0] }()
	for p.pos < len(s) {
		c := s[p.pos]
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
			i := p.pos + 1
			for i < len(s) && plainByte[s[i]] {
				i++
			}
			buf = append(buf, s[p.pos:i]...)
			p.pos = i
		default:
			r, size := utf8.DecodeRuneInString(s[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.fail(RuleUTF8, "invalid UTF-8 byte 0x%02x in a string", c)
			}
			buf = append(buf, s[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
	return "", p.fail(RuleSyntax, "unterminated string")
}

func (p *parser) badUTF8(from int) *Error {
	for i := from; i < len(p.src); {
		r, size := utf8.DecodeRuneInString(p.src[i:])
		if r == utf8.RuneError && size <= 1 {
			p.pos = i
			return p.fail(RuleUTF8, "invalid UTF-8 byte 0x%02x in a string", p.src[i])
		}
		i += size
	}
	return p.fail(RuleUTF8, "invalid UTF-8 in a string")
}

func (p *parser) escape(buf *[]byte) error {
	if p.pos+1 >= len(p.src) {
		return p.fail(RuleSyntax, "unterminated escape sequence")
	}
	c := p.src[p.pos+1]
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
			if p.pos+1 >= len(p.src) || p.src[p.pos] != '\\' || p.src[p.pos+1] != 'u' {
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

func (p *parser) hex4(at int) (rune, error) {
	if at+4 > len(p.src) {
		return 0, p.fail(RuleSyntax, "truncated \\u escape")
	}
	var r rune
	for i := at; i < at+4; i++ {
		c := p.src[i]
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

// plainNumber is the longest number without an exponent that needs no range
// check: its integer part is below 10^300 and a non-zero digit within its
// first 300 places after the point makes it at least 10^-300, well inside
// the doubles (about 1.8e308 down to 4.9e-324).
const plainNumber = 300

// number reads an RFC 8259 number and checks that it is a finite IEEE-754
// double that does not silently round to zero: RFC 8785 (and every verifier)
// reads numbers as doubles, so a literal outside that range would be signed
// as a different number than the one the author wrote.
func (p *parser) number() (Value, error) {
	start := p.pos
	d := p.src
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
		i = skipDigits(d, i)
	default:
		p.pos = i
		return Value{}, p.fail(RuleSyntax, "invalid number: a digit must follow '-'")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			p.pos = i
			return Value{}, p.fail(RuleSyntax, "invalid number: a digit must follow '.'")
		}
		i = skipDigits(d, i)
	}
	exponent := i < len(d) && (d[i] == 'e' || d[i] == 'E')
	if exponent {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			p.pos = i
			return Value{}, p.fail(RuleSyntax, "invalid number: a digit must follow the exponent")
		}
		i = skipDigits(d, i)
	}
	lit := d[start:i]
	if exponent || len(lit) > plainNumber {
		if err := p.numberRange(lit); err != nil {
			return Value{}, err
		}
	}
	p.pos = i
	return Value{Kind: Number, Str: lit}, nil
}

// numberRange refuses a number literal that is not finite as a double or
// that a double rounds to zero though a digit of its mantissa is not.
func (p *parser) numberRange(lit string) error {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return p.fail(RuleNumberRange, "number %s is outside the range of an IEEE-754 double", abbreviate(lit))
	}
	if f != 0 {
		return nil
	}
	mantissa := lit
	if e := strings.IndexAny(lit, "eE"); e >= 0 {
		mantissa = lit[:e]
	}
	if strings.ContainsAny(mantissa, "123456789") {
		return p.fail(RuleNumberRange, "number %s is too small for an IEEE-754 double (it would become 0)", abbreviate(lit))
	}
	return nil
}

func abbreviate(s string) string {
	if len(s) > 40 {
		return s[:20] + "…" + s[len(s)-10:]
	}
	return s
}
