package strictjson

import (
	"math/bits"
	"strings"
	"unicode/utf8"
)

// Compact returns v as JSON without insignificant whitespace, members in
// document order.
func (v Value) Compact() []byte { return v.AppendCompact(nil) }

// AppendCompact appends Compact's form of v to b.
func (v Value) AppendCompact(b []byte) []byte { return appendValue(b, v, "", "") }

// Indent returns v as JSON indented by two spaces per level, with a final
// newline: the form in which cardsign prints cards for people and files.
func (v Value) Indent() []byte {
	return v.AppendIndent(make([]byte, 0, 4096))
}

// AppendIndent appends Indent's form of v to b: a caller that knows the
// size to expect gives a buffer that holds it.
func (v Value) AppendIndent(b []byte) []byte {
	return append(appendValue(b, v, "\n", "  "), '\n')
}

// checkUTF8 finds the first key or string of v that is not valid UTF-8.
// Parse never produces one; values built in code may.
func checkUTF8(v Value, path *PathStack) error {
	bad := func(what string) error {
		return &Error{Path: path.String(), Rule: RuleUTF8, Offset: -1, Reason: what + " is not valid UTF-8"}
	}
	switch v.Kind {
	case String:
		if !utf8.ValidString(v.Str) {
			return bad("string")
		}
	case Array:
		for i, e := range v.Arr {
			path.PushIndex(i)
			if err := checkUTF8(e, path); err != nil {
				return err
			}
			path.Pop()
		}
	case Object:
		for _, m := range v.Obj {
			if !utf8.ValidString(m.Key) {
				return bad("member name")
			}
			path.PushKey(m.Key)
			if err := checkUTF8(m.Val, path); err != nil {
				return err
			}
			path.Pop()
		}
	}
	return nil
}

func appendValue(b []byte, v Value, nl, indent string) []byte {
	switch v.Kind {
	case Null:
		return append(b, "null"...)
	case Bool:
		if v.Bool {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case Number:
		return append(b, v.Str...)
	case String:
		return AppendString(b, v.Str)
	case Array:
		return appendContainer(b, '[', ']', len(v.Arr), nl, indent, func(b []byte, i int, inner string) []byte {
			return appendValue(b, v.Arr[i], inner, indent)
		})
	case Object:
		return appendContainer(b, '{', '}', len(v.Obj), nl, indent, func(b []byte, i int, inner string) []byte {
			m := v.Obj[i]
			b = AppendString(b, m.Key)
			b = append(b, ':')
			if nl != "" {
				b = append(b, ' ')
			}
			return appendValue(b, m.Val, inner, indent)
		})
	}
	return b
}

// appendContainer frames n elements between open and closing, one element a
// line one indent deeper when nl is set (pretty), all on one line when not
// (compact); elem appends element i given the line break its own children
// use. An empty container is written "[]" or "{}" in both forms.
func appendContainer(b []byte, open, closing byte, n int, nl, indent string, elem func(b []byte, i int, inner string) []byte) []byte {
	if n == 0 {
		return append(b, open, closing)
	}
	b = append(b, open)
	inner := nl
	if nl != "" {
		inner = nl + indent
	}
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, inner...)
		b = elem(b, i, inner)
	}
	b = append(b, nl...)
	return append(b, closing)
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, escaping only what JSON requires
// (and the escapes RFC 8785 uses), so that non-ASCII text stays readable. s
// must be valid UTF-8 (the parser's strings are).
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; ; i++ {
		i = skipUnescaped(s, i)
		if i >= len(s) {
			break
		}
		c := s[i]
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// skipUnescaped returns the index of the first byte at or after i in s that
// AppendString escapes, or len(s): eight bytes at a time.
func skipUnescaped(s string, i int) int {
	for i+8 <= len(s) {
		if m := lookMask(load64(s, i), false); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for i < len(s) && !mustEscape[s[i]] {
		i++
	}
	return i
}

// mustEscape marks the bytes a JSON string cannot hold as they stand: the
// controls, '"' and '\\'.
var mustEscape = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// QuoteForMessage renders s for an error message: quoted, escaped as JSON,
// and cut to about 50 characters so that a hostile value cannot flood a
// message.
func QuoteForMessage(s string) string {
	if utf8.RuneCountInString(s) > 60 {
		r := []rune(s)
		s = string(r[:50]) + "…"
	}
	var b strings.Builder
	b.Write(AppendString(nil, s))
	return b.String()
}
