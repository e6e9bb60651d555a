package card

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/cardsign/cardsign/strictjson"
)

// Severity of a lint finding.
type Severity uint8

const (
	// SeverityError blocks signing.
	SeverityError Severity = iota
	// SeverityWarning is printed but signs.
	SeverityWarning
)

func (s Severity) String() string {
	if s == SeverityWarning {
		return "warning"
	}
	return "error"
}

// Finding is one lint result: where, which rule, what is wrong and how to
// fix it.
type Finding struct {
	Severity Severity
	Path     string
	Rule     string
	Message  string
	Fix      string
}

func (f Finding) String() string {
	s := fmt.Sprintf("%s %s: %s [%s]", f.Severity, f.Path, f.Message, f.Rule)
	if f.Fix != "" {
		s += "; fix: " + f.Fix
	}
	return s
}

// HasErrors reports whether any finding is an error.
func HasErrors(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity == SeverityError {
			return true
		}
	}
	return false
}

// MaxFindings bounds what Lint reports: a card of 256 KiB can hold tens of
// thousands of faulty values, and reporting each would cost far more memory
// than the card (and overflow the headers a gRPC error travels in). Past it,
// one last finding (RuleTooManyFindings) counts the rest.
const MaxFindings = 100

// maxErrorText bounds how many findings LintError.Error spells out; the
// Findings themselves carry the rest.
const maxErrorText = 10

// LintError is returned when a card fails lint: it carries its findings, at
// most MaxFindings of them plus a RuleTooManyFindings count of the rest.
type LintError struct{ Findings []Finding }

func (e *LintError) Error() string {
	var errs []string
	var more *Finding
	n := 0
	for i, f := range e.Findings {
		switch {
		case f.Severity != SeverityError:
		case f.Rule == RuleTooManyFindings:
			more = &e.Findings[i]
		default:
			n++
			if len(errs) < maxErrorText {
				errs = append(errs, f.String())
			}
		}
	}
	if n > len(errs) {
		errs = append(errs, fmt.Sprintf("and %d more listed in the findings", n-len(errs)))
	}
	if more != nil {
		errs = append(errs, more.String())
		return fmt.Sprintf("card fails lint with more than %d errors: %s", n, strings.Join(errs, "; "))
	}
	if n == 1 {
		return "card fails lint: " + errs[0]
	}
	return fmt.Sprintf("card fails lint with %d errors: %s", n, strings.Join(errs, "; "))
}

// Lint checks a card in the v1.0 shape against the v1.0 schema and the rules
// that make a signature portable: REQUIRED fields present and non-empty
// (§5.7), JSON types, one member per oneof, absolute https URLs, no keys
// outside the schema (no verifier would cover them), no keys a JavaScript
// verifier would lose.
//
// It reports at most MaxFindings findings; when there are more, a last
// finding with RuleTooManyFindings counts them, as an error if any of them is.
func Lint(v strictjson.Value) []Finding {
	l := linter{}
	if v.Kind != strictjson.Object {
		l.add(SeverityError, strictjson.Root(), strictjson.RuleNotObject, "an Agent Card is a JSON object, not "+v.Kind.String(), "")
		return l.findings
	}
	l.message(v, cardSchema, strictjson.Root())
	// The card's name and version go into the audit log, whose PostgreSQL
	// store cannot hold U+0000 in text (nor can many consumers of card
	// names): refuse it here, naming the field, rather than fail the
	// audit commit after signing.
	for _, name := range []string{"name", "version"} {
		if f, ok := v.Get(name); ok && f.Kind == strictjson.String && strings.ContainsRune(f.Str, 0) {
			l.add(SeverityError, strictjson.Root().Key(name), RuleNUL, "contains U+0000 (NUL), which the audit log cannot record", "remove the \\u0000 escape from "+name)
		}
	}
	return l.done()
}

type linter struct {
	findings []Finding
	// More findings past MaxFindings, counted but not kept.
	moreErrors, moreWarnings int
}

func (l *linter) add(sev Severity, p *strictjson.Path, rule, msg, fix string) {
	if l.full(sev) {
		// Counted without building the path: a hostile card must not turn
		// into a proportional amount of memory (hot callers check full
		// first, before they build the message too).
		return
	}
	l.findings = append(l.findings, Finding{Severity: sev, Path: p.String(), Rule: rule, Message: msg, Fix: fix})
}

// full reports that the findings are at MaxFindings, counting one more of
// sev when they are: a caller checks it before it builds a finding's path
// and message, which a hostile card could otherwise make by the thousand
// only for add to throw them away.
func (l *linter) full(sev Severity) bool {
	if len(l.findings) < MaxFindings {
		return false
	}
	if sev == SeverityError {
		l.moreErrors++
	} else {
		l.moreWarnings++
	}
	return true
}

// done returns the findings, with the count of those past MaxFindings.
func (l *linter) done() []Finding {
	more := l.moreErrors + l.moreWarnings
	if more == 0 {
		return l.findings
	}
	sev := SeverityWarning
	if l.moreErrors > 0 {
		sev = SeverityError
	}
	return append(l.findings, Finding{
		Severity: sev, Path: "$", Rule: RuleTooManyFindings,
		Message: fmt.Sprintf("and %d more findings (%d errors, %d warnings) not listed: only the first %d are reported", more, l.moreErrors, l.moreWarnings, MaxFindings),
		Fix:     "fix the findings listed and lint again",
	})
}

func (l *linter) message(v strictjson.Value, m *message, p *strictjson.Path) {
	top := m == cardSchema
	for _, mem := range v.Obj {
		mp := p.Key(mem.Key)
		l.protoKey(mem.Key, mp)
		f := m.field(mem.Key)
		if f == nil {
			l.unknown(m, mem.Key, mp, top)
			continue
		}
		if ok, want := fits(f, mem.Val); !ok {
			if !l.full(SeverityError) {
				l.add(SeverityError, mp, RuleType, "must be "+want+", not "+mem.Val.Kind.String(), "")
			}
			continue
		}
		l.value(v, f, mem.Val, mp)
	}
	for i := range m.fields {
		f := &m.fields[i]
		if !f.required {
			continue
		}
		val, ok := v.Get(f.name)
		switch {
		case !ok:
			if !l.full(SeverityError) {
				l.add(SeverityError, p.Key(f.name), RuleRequired, "REQUIRED field of "+m.name+" is missing", "add "+f.name)
			}
		case f.kind != kindMessage && allEmpty(val):
			// Empty, or holding only empties (tags: [""]) that the shipped
			// verifiers drop, taking the REQUIRED field with them.
			if fits, _ := fits(f, val); fits && !l.full(SeverityError) {
				l.add(SeverityError, p.Key(f.name), RuleRequired, "REQUIRED field of "+m.name+" is empty (invalid per A2A §5.7; verifiers disagree on empty values)", "give "+f.name+" a value")
			}
		}
	}
	for _, g := range m.oneofGroups() {
		var set []string
		var names []string
		for _, f := range m.fields {
			if f.oneof == g {
				names = append(names, f.name)
				if v.Has(f.name) {
					set = append(set, f.name)
				}
			}
		}
		switch {
		case len(set) == 0:
			l.add(SeverityError, p, RuleOneof, m.name+" must hold exactly one of "+strings.Join(names, ", ")+"; it holds none", "add one of them")
		case len(set) > 1:
			l.add(SeverityError, p, RuleOneof, m.name+" must hold exactly one of "+strings.Join(names, ", ")+"; it holds "+strings.Join(set, " and "), "keep one, split the rest into separate entries")
		}
	}
}

func (l *linter) value(parent strictjson.Value, f *field, v strictjson.Value, p *strictjson.Path) {
	switch f.kind {
	case kindString:
		if f.url != notURL && v.Str != "" {
			binding := ""
			if f.url == interfaceURL {
				b, _ := parent.Get("protocolBinding")
				binding = b.Str
			}
			l.url(v.Str, f.url, binding, p)
		}
		if f.name == "protocolBinding" && v.Str != "" {
			switch v.Str {
			case "JSONRPC", "GRPC", "HTTP+JSON":
			default:
				l.add(SeverityWarning, p, RuleBinding, "protocol binding "+strictjson.QuoteForMessage(v.Str)+" is not one of the A2A core bindings (JSONRPC, GRPC, HTTP+JSON)", "use a core binding unless clients know this custom one")
			}
		}
	case kindMessage:
		l.message(v, f.msg, p)
	case kindStruct:
		l.freeForm(v, p)
	case kindStrings, kindMessages:
		for i, e := range v.Arr {
			// The element's path is built only when it is needed: a string
			// that fits costs no allocation.
			if ok, want := elemFits(f, e); !ok {
				if !l.full(SeverityError) {
					l.add(SeverityError, p.Index(i), RuleType, "must be "+want+", not "+e.Kind.String(), "")
				}
			} else if f.kind == kindMessages {
				l.message(e, f.msg, p.Index(i))
			}
		}
	case kindStringMap, kindMessageMap:
		for _, e := range v.Obj {
			ep := p.Key(e.Key)
			l.protoKey(e.Key, ep)
			if ok, want := elemFits(f, e.Val); !ok {
				if !l.full(SeverityError) {
					l.add(SeverityError, ep, RuleType, "must be "+want+", not "+e.Val.Kind.String(), "")
				}
			} else if f.kind == kindMessageMap {
				l.message(e.Val, f.msg, ep)
			}
		}
	}
}

// freeForm checks a google.protobuf.Struct value: any JSON goes, but keys a
// JavaScript verifier would turn into prototype writes are refused.
func (l *linter) freeForm(v strictjson.Value, p *strictjson.Path) {
	switch v.Kind {
	case strictjson.Object:
		for _, m := range v.Obj {
			mp := p.Key(m.Key)
			l.protoKey(m.Key, mp)
			l.freeForm(m.Val, mp)
		}
	case strictjson.Array:
		for i, e := range v.Arr {
			l.freeForm(e, p.Index(i))
		}
	}
}

// protoKey refuses "__proto__": @a2a-js/sdk rebuilds objects by assignment,
// where this key sets the prototype instead of a member, so the member
// vanishes from its canonical bytes and the card would verify differently
// there than anywhere else.
func (l *linter) protoKey(key string, p *strictjson.Path) {
	if key == "__proto__" {
		l.add(SeverityError, p, RulePortability, "the key __proto__ is lost by JavaScript verifiers", "rename the key")
	}
}

func (l *linter) unknown(m *message, key string, p *strictjson.Path, top bool) {
	msg := "key is not in the A2A v1.0 " + m.name + " schema; no verifier's signature check covers it"
	fix := "remove it, or sign with --strip-unknown"
	if alias := camelCase(key); alias != key && m.field(alias) != nil {
		fix = "rename it to " + alias + " (the JSON name in v1.0)"
	} else if top {
		for _, k := range v03Only {
			if k == key {
				msg = "key is a v0.3 card member, not part of the v1.0 shape"
				fix = "remove it, or write the card in the v0.3 shape (top-level url, no supportedInterfaces) so that it is mapped"
				if key == "security" {
					fix = "use securityRequirements: [{\"schemes\": {\"NAME\": {\"list\": [SCOPES]}}}]"
				}
			}
		}
	} else if m.name == "AgentCapabilities" && key == "stateTransitionHistory" {
		msg = "stateTransitionHistory was removed in v1.0"
	}
	l.add(SeverityError, p, RuleUnknownField, msg, fix)
}

// camelCase turns a proto field name (protocol_binding) into its JSON name.
func camelCase(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	var b strings.Builder
	up := false
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		up = false
		b.WriteRune(r)
	}
	return b.String()
}

func (l *linter) url(s string, rule urlRule, binding string, p *strictjson.Path) {
	if rule == interfaceURL && binding == "GRPC" && IsHostPort(s) {
		return
	}
	fix := "use an absolute https:// URL"
	if rule == interfaceURL && binding == "GRPC" {
		fix = "use an absolute https:// URL or host:port"
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Hostname() == "" {
		// The value is not echoed: a malformed URL may still carry a password.
		l.add(SeverityError, p, RuleURL, "not an absolute URL with a host", fix)
		return
	}
	if u.User != nil {
		l.add(SeverityError, p, RuleURL, "URL carries user credentials, which would be published with the card", "remove the user:password@ part")
		return
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if IsLoopbackHost(u.Hostname()) {
			l.add(SeverityWarning, p, RuleURL, "plain http is only acceptable for a loopback host", "use https outside local testing")
			return
		}
		l.add(SeverityError, p, RuleURL, "plain http URL for a non-loopback host", fix)
	default:
		l.add(SeverityError, p, RuleURL, "URL scheme "+strictjson.QuoteForMessage(u.Scheme)+" is not https", fix)
	}
}

// IsHostPort reports whether s is a bare host:port with a port in 1..65535,
// the form a gRPC interface url takes instead of a URL (grpc-go dials
// "host:port"). The linter accepts it for GRPC interfaces, and the signing
// policy (package policy) must read such a url the same way.
func IsHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || strings.ContainsAny(host, "/?#@ ") {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n < 65536
}

// IsLoopbackHost reports whether host names this machine: localhost, a
// *.localhost name (RFC 6761), or a loopback IP address.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// StripUnknown returns v without the keys that lie outside the v1.0 schema
// (free-form params and header are left alone) and the paths it removed.
func StripUnknown(v strictjson.Value) (strictjson.Value, []string) {
	var removed []string
	out := strip(v, cardSchema, strictjson.Root(), &removed)
	return out, removed
}

func strip(v strictjson.Value, m *message, p *strictjson.Path, removed *[]string) strictjson.Value {
	if v.Kind != strictjson.Object {
		return v
	}
	out := make([]strictjson.Member, 0, len(v.Obj))
	for _, mem := range v.Obj {
		mp := p.Key(mem.Key)
		f := m.field(mem.Key)
		if f == nil {
			*removed = append(*removed, mp.String())
			continue
		}
		switch f.kind {
		case kindMessage:
			mem.Val = strip(mem.Val, f.msg, mp, removed)
		case kindMessages:
			if mem.Val.Kind == strictjson.Array {
				elems := make([]strictjson.Value, len(mem.Val.Arr))
				for i, e := range mem.Val.Arr {
					elems[i] = strip(e, f.msg, mp.Index(i), removed)
				}
				mem.Val = strictjson.Value{Kind: strictjson.Array, Arr: elems}
			}
		case kindMessageMap:
			if mem.Val.Kind == strictjson.Object {
				entries := make([]strictjson.Member, len(mem.Val.Obj))
				for i, e := range mem.Val.Obj {
					entries[i] = strictjson.Member{Key: e.Key, Val: strip(e.Val, f.msg, mp.Key(e.Key), removed)}
				}
				mem.Val = strictjson.Value{Kind: strictjson.Object, Obj: entries}
			}
		}
		out = append(out, mem)
	}
	return strictjson.Value{Kind: strictjson.Object, Obj: out}
}

// allEmpty reports whether dropEmpty(v) is Null (v is empty or holds only
// empties and "__proto__" members) without building the cleaned copy.
func allEmpty(v strictjson.Value) bool {
	switch v.Kind {
	case strictjson.Null:
		return true
	case strictjson.String:
		return v.Str == ""
	case strictjson.Array:
		for _, e := range v.Arr {
			if !allEmpty(e) {
				return false
			}
		}
		return true
	case strictjson.Object:
		for _, m := range v.Obj {
			if m.Key != "__proto__" && !allEmpty(m.Val) {
				return false
			}
		}
		return true
	}
	return false
}
