package policy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"

	"github.com/cardsign/cardsign/carddiff"
	"github.com/cardsign/cardsign/strictjson"
)

// Limits of a rule's when expression. They are fixed rather than
// configurable: a rule that needs more is doing more than deciding whether
// a card may be signed.
const (
	// MaxExpressionBytes bounds the text of one expression.
	MaxExpressionBytes = 4096
	// maxRecursion bounds the parser's nesting (parentheses, calls).
	maxRecursion = 32
	// maxComprehensionNesting bounds nested macros (all, exists, map,
	// filter): two levels reach a card's skills' tags; three is plenty.
	maxComprehensionNesting = 3
	// CostLimit bounds one evaluation in CEL's cost units (about one per
	// operation; some 10 ms of CPU): a rule over a card's lists of a
	// thousand entries costs a few thousand.
	CostLimit = 100_000
	// EvalTimeout bounds one decision (every condition rule's evaluation)
	// in time, whatever their cost.
	EvalTimeout = 100 * time.Millisecond
)

// Request is what a signing request asks beyond the card: the `request`
// variable of a rule.
type Request struct {
	// AgentID is the registry agent the card is registered under, or the
	// one derived from its URL when it is not registered ("" if none).
	AgentID string `cel:"agent_id"`
	// Register reports whether the card is registered.
	Register bool `cel:"register"`
	// Visibility is "public", "private" or "" (unchanged).
	Visibility string `cel:"visibility"`
	// Profile is the canonical profile asked for ("spec", "sdk", "both",
	// "python-ascii"; "" for the default).
	Profile string `cel:"profile"`
}

// Input is everything a rule's expression sees.
type Input struct {
	Caller Caller
	// Card is the card to sign, in the v1.0 shape card.Load returns.
	Card strictjson.Value
	// Previous is the agent's latest registered card, or the zero Value
	// (JSON null) when there is none.
	Previous strictjson.Value
	// Diff is carddiff.Compute(Card, Previous).
	Diff    carddiff.Diff
	Request Request
}

// celCaller is the `caller` variable.
type celCaller struct {
	Identity   string            `cel:"identity"`
	Method     string            `cel:"method"`
	Roles      []string          `cel:"roles"`
	Claims     map[string]string `cel:"claims"`
	Provenance map[string]string `cel:"provenance"`
}

// newEnv is the environment every expression is compiled in: the five
// variables, CEL's standard library, optional values (`claims.?ref`),
// the strings and sets extensions, and the parser's limits.
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(reflect.TypeFor[carddiff.Diff](), reflect.TypeFor[celCaller](), reflect.TypeFor[Request](), ext.ParseStructTags(true)),
		cel.Variable("card", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("previous", cel.DynType),
		cel.Variable("diff", cel.ObjectType("carddiff.Diff")),
		cel.Variable("caller", cel.ObjectType("policy.celCaller")),
		cel.Variable("request", cel.ObjectType("policy.Request")),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		cel.ParserExpressionSizeLimit(MaxExpressionBytes),
		cel.ParserRecursionLimit(maxRecursion),
		cel.ASTValidators(cel.ValidateComprehensionNestingLimit(maxComprehensionNesting), cel.ValidateHomogeneousAggregateLiterals(), cel.ValidateRegexLiterals()),
		cel.CrossTypeNumericComparisons(true),
	)
}

// compileWhen compiles and type-checks one rule's expression. The error
// names the position in the expression (line:column) of each issue.
func compileWhen(env *cel.Env, expr string) (cel.Program, error) {
	switch {
	case strings.TrimSpace(expr) == "":
		return nil, errors.New("is empty; write a CEL expression such as size(diff.hosts_added) > 0")
	case len(expr) > MaxExpressionBytes:
		return nil, fmt.Errorf("is %d bytes, over the limit of %d", len(expr), MaxExpressionBytes)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, errors.New(celIssues(iss))
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Errorf("is of type %s; it must be a bool (true: the rule decides)", t)
	}
	return env.Program(ast,
		cel.CostLimit(CostLimit),
		cel.InterruptCheckFrequency(64),
		cel.EvalOptions(cel.OptOptimize),
	)
}

// celIssues renders compile issues as "line:column: message", one per
// line, without CEL's source excerpt (the configuration error names the
// file's line already).
func celIssues(iss *cel.Issues) string {
	var b strings.Builder
	for i, e := range iss.Errors() {
		if i > 0 {
			b.WriteString("; ")
		}
		loc := e.Location
		fmt.Fprintf(&b, "%d:%d: %s", loc.Line(), loc.Column()+1, e.Message)
	}
	return b.String()
}

// activation is the variables of one decision (interpreter.Activation).
// Each is made a CEL value once per decision, on first use, not once per
// rule: most rules read the diff and the caller, few the card.
type activation struct {
	in      Input
	adapter types.Adapter
	vals    [5]ref.Val // by variable index
}

// The variables, by index in activation.vals.
var variables = [...]string{"card", "previous", "diff", "caller", "request"}

func newActivation(in Input, adapter types.Adapter) *activation {
	return &activation{in: in, adapter: adapter}
}

// ResolveName returns the variable name.
func (a *activation) ResolveName(name string) (any, bool) {
	i := 0
	for i < len(variables) && variables[i] != name {
		i++
	}
	if i == len(variables) {
		return nil, false
	}
	if a.vals[i] == nil {
		a.vals[i] = a.adapter.NativeToValue(a.native(i))
	}
	return a.vals[i], true
}

// native is variable i as a Go value CEL's adapters know.
func (a *activation) native(i int) any {
	in := a.in
	switch variables[i] {
	case "card":
		if m, ok := native(in.Card).(map[string]any); ok {
			return m
		}
		return map[string]any{}
	case "previous":
		if in.Previous.Kind == strictjson.Null {
			return nil
		}
		return native(in.Previous)
	case "diff":
		return in.Diff
	case "caller":
		c := in.Caller
		orEmpty := func(m map[string]string) map[string]string {
			if m == nil {
				return map[string]string{}
			}
			return m
		}
		roles := c.Roles
		if roles == nil {
			roles = []string{}
		}
		return celCaller{Identity: c.Identity, Method: c.Method, Roles: roles, Claims: orEmpty(c.Claims), Provenance: orEmpty(c.Provenance)}
	}
	return in.Request
}

// Parent is nil: there is one level of variables.
func (a *activation) Parent() interpreter.Activation { return nil }

// native converts a JSON value to the Go values CEL's default adapter
// knows: maps, lists, strings, bools, nil, and numbers as doubles (JSON
// has one number type; CrossTypeNumericComparisons lets 2 == 2.0).
func native(v strictjson.Value) any {
	switch v.Kind {
	case strictjson.Bool:
		return v.Bool
	case strictjson.String:
		return v.Str
	case strictjson.Number:
		f, err := strconv.ParseFloat(v.Str, 64)
		if err != nil {
			return v.Str // cannot happen: strictjson refuses numbers outside a double
		}
		return f
	case strictjson.Array:
		out := make([]any, len(v.Arr))
		for i, e := range v.Arr {
			out[i] = native(e)
		}
		return out
	case strictjson.Object:
		out := make(map[string]any, len(v.Obj))
		for _, m := range v.Obj {
			out[m.Key] = native(m.Val)
		}
		return out
	}
	return nil
}

// eval runs one compiled expression. A result that is not a bool, a cost
// or time limit reached, or any runtime error (a missing key, a type
// mismatch) is an error: the caller fails closed.
func eval(ctx context.Context, prg cel.Program, act *activation) (bool, error) {
	out, _, err := prg.ContextEval(ctx, act)
	if err != nil {
		if ctx.Err() != nil {
			return false, fmt.Errorf("stopped by the time limit of %s per decision: %v", EvalTimeout, err)
		}
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("evaluated to %s, not a bool", typeName(out))
	}
	return bool(b), nil
}

func typeName(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().TypeName()
}
