package card

// Rules name what a card broke, beyond the JSON rules of strictjson
// (strictjson.RuleSyntax, strictjson.RuleDuplicateKey, ...). They are stable
// identifiers: callers and tests branch on them, and they appear in every
// message, in a *strictjson.Error or a lint Finding.
const (
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
