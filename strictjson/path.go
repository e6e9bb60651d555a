package strictjson

import (
	"strconv"
	"strings"
)

// Path is the location of a value in a document, such as skills[2].tags. It is
// built as a value (not a string) while walking a document so that the walk
// allocates nothing until an error needs the text.
type Path struct {
	parent *Path
	key    string
	index  int // -1 for a member key
}

// Root returns the path of the document itself, "$".
func Root() *Path { return &Path{index: -1} }

// Key returns the path of member key below p.
func (p *Path) Key(key string) *Path { return &Path{parent: p, key: key, index: -1} }

// Index returns the path of element i below p.
func (p *Path) Index(i int) *Path { return &Path{parent: p, index: i} }

// String renders the path in the JavaScript-like notation people use for
// JSON: name.sub[3], with bracketed quotes for keys that are not plain
// identifiers (securitySchemes["my scheme"]). The root is "$".
func (p *Path) String() string {
	var segs []segment
	for q := p; q != nil && (q.parent != nil || q.key != "" || q.index >= 0); q = q.parent {
		segs = append(segs, segment{key: q.key, index: q.index})
	}
	for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
		segs[i], segs[j] = segs[j], segs[i]
	}
	return formatPath(segs)
}

// segment is one step of a path: a member key, or an array index when
// index >= 0.
type segment struct {
	key   string
	index int
}

// PathStack is a path kept as a stack during a walk on a hot path: pushing
// and popping allocate nothing, and the text is built only for an error. The
// zero PathStack is the root, "$".
type PathStack []segment

// PushKey descends into member k.
func (s *PathStack) PushKey(k string) { *s = append(*s, segment{key: k, index: -1}) }

// PushIndex descends into element i.
func (s *PathStack) PushIndex(i int) { *s = append(*s, segment{index: i}) }

// Pop goes back up one step.
func (s *PathStack) Pop() { *s = (*s)[:len(*s)-1] }

// String renders the path as Path.String does.
func (s PathStack) String() string { return formatPath(s) }

func formatPath(segs []segment) string {
	if len(segs) == 0 {
		return "$"
	}
	var b strings.Builder
	for _, s := range segs {
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
