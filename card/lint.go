package card

import (
	"fmt"
	"net"
	"net/url"
	"slices"
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
	l := linter{path: make(strictjson.PathStack, 0, 8)}
	if v.Kind != strictjson.Object {
		l.add(SeverityError, strictjson.RuleNotObject, "an Agent Card is a JSON object, not "+v.Kind.String(), "")
		return l.findings
	}
	l.message(v, cardSchema)
	// The card's name and version go into the audit log, whose PostgreSQL
	// store cannot hold U+0000 in text (nor can many consumers of card
	// names): refuse it here, naming the field, rather than fail the
	// audit commit after signing.
	for _, name := range []string{"name", "version"} {
		if f, ok := v.Get(name); ok && f.Kind == strictjson.String && strings.ContainsRune(f.Str, 0) {
			l.path.PushKey(name)
			l.add(SeverityError, RuleNUL, "contains U+0000 (NUL), which the audit log cannot record", "remove the \\u0000 escape from "+name)
			l.path.Pop()
		}
	}
	return l.done()
}

type linter struct {
	findings []Finding
	// path is where the walk stands: a stack, so that descending costs no
	// allocation; its text is built only for a finding (add).
	path strictjson.PathStack
	// More findings past MaxFindings, counted but not kept.
	moreErrors, moreWarnings int
}

// add records a finding at the walk's current path.
func (l *linter) add(sev Severity, rule, msg, fix string) {
	if l.full(sev) {
		// Counted without building the path: a hostile card must not turn
		// into a proportional amount of memory (hot callers check full
		// first, before they build the message too).
		return
	}
	l.findings = append(l.findings, Finding{Severity: sev, Path: l.path.String(), Rule: rule, Message: msg, Fix: fix})
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

func (l *linter) message(v strictjson.Value, m *message) {
	top := m == cardSchema
	for _, mem := range v.Obj {
		l.path.PushKey(mem.Key)
		l.member(v, m, mem, top)
		l.path.Pop()
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
				l.path.PushKey(f.name)
				l.add(SeverityError, RuleRequired, "REQUIRED field of "+m.name+" is missing", "add "+f.name)
				l.path.Pop()
			}
		case f.kind != kindMessage && allEmpty(val):
			// Empty, or holding only empties (tags: [""]) that the shipped
			// verifiers drop, taking the REQUIRED field with them.
			if fits, _ := fits(f, val); fits && !l.full(SeverityError) {
				l.path.PushKey(f.name)
				l.add(SeverityError, RuleRequired, "REQUIRED field of "+m.name+" is empty (invalid per A2A §5.7; verifiers disagree on empty values)", "give "+f.name+" a value")
				l.path.Pop()
			}
		}
	}
	for i, gf := range m.fields {
		// Each oneof group once, at its first field, counted without
		// allocating: the names are listed only for a finding.
		g := gf.oneof
		if g == "" || slices.ContainsFunc(m.fields[:i], func(f field) bool { return f.oneof == g }) {
			continue
		}
		n := 0
		for _, f := range m.fields[i:] {
			if f.oneof == g && v.Has(f.name) {
				n++
			}
		}
		if n == 1 {
			continue
		}
		var set []string
		var names []string
		for _, f := range m.fields[i:] {
			if f.oneof == g {
				names = append(names, f.name)
				if v.Has(f.name) {
					set = append(set, f.name)
				}
			}
		}
		switch {
		case len(set) == 0:
			l.add(SeverityError, RuleOneof, m.name+" must hold exactly one of "+strings.Join(names, ", ")+"; it holds none", "add one of them")
		case len(set) > 1:
			l.add(SeverityError, RuleOneof, m.name+" must hold exactly one of "+strings.Join(names, ", ")+"; it holds "+strings.Join(set, " and "), "keep one, split the rest into separate entries")
		}
	}
}

// member checks one member of a message, at the member's path.
func (l *linter) member(v strictjson.Value, m *message, mem strictjson.Member, top bool) {
	l.protoKey(mem.Key)
	f := m.field(mem.Key)
	if f == nil {
		l.unknown(m, mem.Key, top)
		return
	}
	if ok, want := fits(f, mem.Val); !ok {
		if !l.full(SeverityError) {
			l.add(SeverityError, RuleType, "must be "+want+", not "+mem.Val.Kind.String(), "")
		}
		return
	}
	l.value(v, f, mem.Val)
}

// value checks the value of field f, at the field's path.
func (l *linter) value(parent strictjson.Value, f *field, v strictjson.Value) {
	switch f.kind {
	case kindString:
		if f.url != notURL && v.Str != "" {
			binding := ""
			if f.url == interfaceURL {
				b, _ := parent.Get("protocolBinding")
				binding = b.Str
			}
			l.url(v.Str, f.url, binding)
		}
		if f.name == "protocolBinding" && v.Str != "" {
			switch v.Str {
			case "JSONRPC", "GRPC", "HTTP+JSON":
			default:
				l.add(SeverityWarning, RuleBinding, "protocol binding "+strictjson.QuoteForMessage(v.Str)+" is not one of the A2A core bindings (JSONRPC, GRPC, HTTP+JSON)", "use a core binding unless clients know this custom one")
			}
		}
	case kindMessage:
		l.message(v, f.msg)
	case kindStruct:
		l.freeForm(v)
	case kindStrings, kindMessages:
		for i, e := range v.Arr {
			l.path.PushIndex(i)
			if ok, want := elemFits(f, e); !ok {
				if !l.full(SeverityError) {
					l.add(SeverityError, RuleType, "must be "+want+", not "+e.Kind.String(), "")
				}
			} else if f.kind == kindMessages {
				l.message(e, f.msg)
			}
			l.path.Pop()
		}
	case kindStringMap, kindMessageMap:
		for _, e := range v.Obj {
			l.path.PushKey(e.Key)
			l.protoKey(e.Key)
			if ok, want := elemFits(f, e.Val); !ok {
				if !l.full(SeverityError) {
					l.add(SeverityError, RuleType, "must be "+want+", not "+e.Val.Kind.String(), "")
				}
			} else if f.kind == kindMessageMap {
				l.message(e.Val, f.msg)
			}
			l.path.Pop()
		}
	}
}

// freeForm checks a google.protobuf.Struct value: any JSON goes, but keys a
// JavaScript verifier would turn into prototype writes are refused.
func (l *linter) freeForm(v strictjson.Value) {
	switch v.Kind {
	case strictjson.Object:
		for _, m := range v.Obj {
			l.path.PushKey(m.Key)
			l.protoKey(m.Key)
			l.freeForm(m.Val)
			l.path.Pop()
		}
	case strictjson.Array:
		for i, e := range v.Arr {
			l.path.PushIndex(i)
			l.freeForm(e)
			l.path.Pop()
		}
	}
}

// protoKey refuses "__proto__": @a2a-js/sdk rebuilds objects by assignment,
// where this key sets the prototype instead of a member, so the member
// vanishes from its canonical bytes and the card would verify differently
// there than anywhere else.
func (l *linter) protoKey(key string) {
	if key == "__proto__" {
		l.add(SeverityError, RulePortability, "the key __proto__ is lost by JavaScript verifiers", "rename the key")
	}
}

func (l *linter) unknown(m *message, key string, top bool) {
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
	l.add(SeverityError, RuleUnknownField, msg, fix)
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

func (l *linter) url(s string, rule urlRule, binding string) {
	if rule == interfaceURL && binding == "GRPC" && IsHostPort(s) {
		return
	}
	if plainHTTPS(s) {
		return // what url.Parse would accept without a finding, unparsed
	}
	fix := "use an absolute https:// URL"
	if rule == interfaceURL && binding == "GRPC" {
		fix = "use an absolute https:// URL or host:port"
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Hostname() == "" {
		// The value is not echoed: a malformed URL may still carry a password.
		l.add(SeverityError, RuleURL, "not an absolute URL with a host", fix)
		return
	}
	if u.User != nil {
		l.add(SeverityError, RuleURL, "URL carries user credentials, which would be published with the card", "remove the user:password@ part")
		return
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if IsLoopbackHost(u.Hostname()) {
			l.add(SeverityWarning, RuleURL, "plain http is only acceptable for a loopback host", "use https outside local testing")
			return
		}
		l.add(SeverityError, RuleURL, "plain http URL for a non-loopback host", fix)
	default:
		l.add(SeverityError, RuleURL, "URL scheme "+strictjson.QuoteForMessage(u.Scheme)+" is not https", fix)
	}
}

// plainHTTPS reports whether s is an https URL that the checks of
// linter.url pass for sure, without parsing it: "https://", then a host of
// lower-case letters, digits, dots and hyphens starting with a letter or
// digit, an optional port of digits, and, after a '/', '?' or '#', only
// printable ASCII without '%' (so no escape url.Parse could refuse and no
// userinfo: an '@' ends the host with a character the host may not hold).
// Any other URL, most real ones included, takes the general path.
func plainHTTPS(s string) bool {
	rest, ok := strings.CutPrefix(s, "https://")
	if !ok || rest == "" || !isLowerAlnum(rest[0]) {
		return false
	}
	i := 0
	for i < len(rest) && (isLowerAlnum(rest[i]) || rest[i] == '.' || rest[i] == '-') {
		i++
	}
	if i < len(rest) && rest[i] == ':' {
		for i++; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
		}
	}
	if i < len(rest) && rest[i] != '/' && rest[i] != '?' && rest[i] != '#' {
		return false
	}
	for ; i < len(rest); i++ {
		if c := rest[i]; c <= ' ' || c >= 0x7f || c == '%' {
			return false
		}
	}
	return true
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// IsHostPort reports whether s is a bare host:port with a port in 1..65535,
// the form a gRPC interface url takes instead of a URL (grpc-go dials
// "host:port"). The linter accepts it for GRPC interfaces, and the signing
// policy (package policy) must read such a url the same way.
func IsHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || strings.ContainsAny(host, "/?#@ ") {
		return false
	}
	if port == "" || len(port) > 5 || strings.ContainsFunc(port, func(r rune) bool { return r < '0' || r > '9' }) {
		return false // and no error to allocate: a URL's "//host/path" is no port
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
// Only the objects and arrays on the way to a removed key are copied: the
// rest of the result shares v's values, and v itself is left as it was.
func StripUnknown(v strictjson.Value) (strictjson.Value, []string) {
	s := stripper{path: make(strictjson.PathStack, 0, 8)}
	out, _ := s.strip(v, cardSchema)
	return out, s.removed
}

// stripper is the state of one StripUnknown walk: where it stands (a stack,
// rendered only for a removed key) and what it removed.
type stripper struct {
	path    strictjson.PathStack
	removed []string
}

// strip returns v without its unknown keys, and whether it changed: an
// unchanged v is returned as it is, without a copy.
func (s *stripper) strip(v strictjson.Value, m *message) (strictjson.Value, bool) {
	if v.Kind != strictjson.Object {
		return v, false
	}
	var out []strictjson.Member // nil until something changes
	for i, mem := range v.Obj {
		s.path.PushKey(mem.Key)
		val, keep, changed := s.member(mem, m)
		s.path.Pop()
		if out == nil && (changed || !keep) {
			out = make([]strictjson.Member, i, len(v.Obj))
			copy(out, v.Obj[:i])
		}
		if out != nil && keep {
			out = append(out, strictjson.Member{Key: mem.Key, Val: val})
		}
	}
	if out == nil {
		return v, false
	}
	return strictjson.Value{Kind: strictjson.Object, Obj: out}, true
}

// member strips one member of a message, at the member's path: whether to
// keep it, and its value, changed or not.
func (s *stripper) member(mem strictjson.Member, m *message) (val strictjson.Value, keep, changed bool) {
	f := m.field(mem.Key)
	if f == nil {
		s.removed = append(s.removed, s.path.String())
		return strictjson.Value{}, false, true
	}
	switch f.kind {
	case kindMessage:
		val, changed = s.strip(mem.Val, f.msg)
		return val, true, changed
	case kindMessages:
		if mem.Val.Kind == strictjson.Array {
			var elems []strictjson.Value // nil until an element changes
			for i, e := range mem.Val.Arr {
				s.path.PushIndex(i)
				ev, ch := s.strip(e, f.msg)
				s.path.Pop()
				if ch && elems == nil {
					elems = slices.Clone(mem.Val.Arr)
				}
				if elems != nil {
					elems[i] = ev
				}
			}
			if elems != nil {
				return strictjson.Value{Kind: strictjson.Array, Arr: elems}, true, true
			}
		}
	case kindMessageMap:
		if mem.Val.Kind == strictjson.Object {
			var entries []strictjson.Member // nil until an entry changes
			for i, e := range mem.Val.Obj {
				s.path.PushKey(e.Key)
				ev, ch := s.strip(e.Val, f.msg)
				s.path.Pop()
				if ch && entries == nil {
					entries = slices.Clone(mem.Val.Obj)
				}
				if entries != nil {
					entries[i].Val = ev
				}
			}
			if entries != nil {
				return strictjson.Value{Kind: strictjson.Object, Obj: entries}, true, true
			}
		}
	}
	return mem.Val, true, false
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
