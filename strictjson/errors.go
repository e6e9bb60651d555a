package strictjson

import "fmt"

// Rules name what a document broke. They are stable identifiers: callers and
// tests branch on them, and they appear in every message. Packages that read
// a schema over the tree (card) add rules of their own to Error.
const (
	RuleSize         = "max-size"
	RuleDepth        = "max-depth"
	RuleMaxValues    = "max-values"
	RuleMaxItems     = "max-items"
	RuleSyntax       = "syntax"
	RuleUTF8         = "invalid-utf8"
	RuleSurrogate    = "lone-surrogate"
	RuleNumberRange  = "number-range"
	RuleDuplicateKey = "duplicate-key"
	RuleTrailingData = "trailing-data"
	RuleNotObject    = "not-object"
)

// Error is a document that cannot be read: malformed JSON, a limit exceeded,
// or (in a package that reads a schema over the tree) a value of the wrong
// type. Path says where, Rule says which rule, Reason says why in one line.
type Error struct {
	Path   string
	Rule   string
	Reason string
	Offset int // byte offset into the input; -1 when the error is not about a byte
}

// Error renders the error as "path: reason [rule]", with the byte offset
// when there is one.
func (e *Error) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("%s: %s [%s] (at byte %d)", e.Path, e.Reason, e.Rule, e.Offset)
	}
	return fmt.Sprintf("%s: %s [%s]", e.Path, e.Reason, e.Rule)
}
