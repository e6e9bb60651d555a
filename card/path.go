package card

import (
	"strconv"
	"strings"
)

// Path is the location of a value in a card, such as skills[2].tags. It is
// built as a value (not a string) while walking a document so that the walk
// allocates nothing until an error needs the text.
type Path struct {
	parent *Path
	key    string
	index  int // -1 for a member key
}

// Key returns the path of member key below p.
func (p *Path) Key(key string) *Path { return &Path{parent: p, key: key, index: -1} }

// Index returns the path of element i below p.
func (p *Path) Index(i int) *Path { return &Path{parent: p, index: i} }

// String renders the path in the JavaScript-like notation people use for
// JSON: name.sub[3], with bracketed quotes for keys that are not plain
// identifiers (securitySchemes["my scheme"]). The root is "$".
func (p *Path) String() string {
	if p == nil || p.parent == nil && p.key == "" && p.index < 0 {
		return "$"
	}
	var segs []*Path
	for q := p; q != nil && (q.parent != nil || q.key != "" || q.index >= 0); q = q.parent {
		segs = append(segs, q)
	}
	var b strings.Builder
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		switch {
		case s.index >= 0:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		case isIdentifier(s.key):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		default:
			b.WriteByte('[')
			b.WriteString(strconv.Quote(s.key))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '$':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
