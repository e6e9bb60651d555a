package card

import "fmt"

// Rules name what a card broke. They are stable identifiers: callers and
// tests branch on them, and they appear in every message.
const (
	RuleSize          = "max-size"
	RuleDepth         = "max-depth"
	RuleMaxValues     = "max-values"
	RuleMaxItems      = "max-items"
	RuleSyntax        = "syntax"
	RuleUTF8          = "invalid-utf8"
	RuleSurrogate     = "lone-surrogate"
	RuleNumberRange   = "number-range"
	RuleDuplicateKey  = "duplicate-key"
	RuleTrailingData  = "trailing-data"
	RuleNotObject     = "not-object"
	RuleType          = "type"
	RuleRequired      = "required"
	RuleUnknownField  = "unknown-field"
	RuleOneof         = "oneof"
	RuleURL           = "url"
	RulePortability   = "portability"
	RuleV03           = "v0.3-mapping"
	RuleBinding       = "protocol-binding"
	RuleProfileDiffer = "profile-divergence"
	RuleNUL           = "nul-character"
	// RuleTooManyFindings counts the findings past MaxFindings.
	RuleTooManyFindings = "too-many-findings"
)

// Error is a card that cannot be read: malformed JSON, a limit exceeded, or a
// value of the wrong type. Path says where, Rule says which rule, Reason says
// why in one line.
type Error struct {
	Path   string
	Rule   string
	Reason string
	Offset int // byte offset into the input; -1 when the error is not about a byte
}

func (e *Error) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("%s: %s [%s] (at byte %d)", e.Path, e.Reason, e.Rule, e.Offset)
	}
	return fmt.Sprintf("%s: %s [%s]", e.Path, e.Reason, e.Rule)
}
