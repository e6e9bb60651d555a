// Package policy decides which Agent Cards a caller may sign.
//
// A signing authority that signs whatever it is sent lets any pipeline that
// can reach it publish a card naming another team's agent, or pointing
// clients at another team's hosts or an attacker's. A policy ties callers
// (by identity or role) to the card names and interface hosts they may sign.
//
// The rules are:
//
//   - With no rules, every caller may sign any card, subject only to
//     require_https (default true: every supportedInterfaces[].url must be
//     an https URL). Such a refusal names the pseudo-rule "require_https".
//   - With rules, the rules that apply to a caller are those whose
//     identities match its identity or whose roles include one of its roles.
//     If none applies, the card is refused.
//   - A card is allowed if at least one applicable rule allows it: the
//     card's name matches one of the rule's card_names, the host of every
//     supportedInterfaces[].url matches one of the rule's hosts, and, when
//     the rule requires https (its require_https, else the policy-wide one),
//     every such url is https. A card with no supportedInterfaces is judged
//     on its name alone.
//   - If every applicable rule refuses, the refusal names the first
//     applicable rule in configuration order and its first failing check
//     (name first, then each url in order: host, then https), and says how
//     many other applicable rules also refused.
//
// Identity and card name patterns are globs anchored at both ends: '*'
// matches any run of characters, '/' included, and '?' matches one
// character. There is no escape and no character class; matching is
// case-sensitive. So "cert:spiffe://example.org/ci/team-a/*" matches every
// identity below team-a/ but not "cert:spiffe://example.org/ci/team-a" itself.
//
// Host patterns are host names or IP addresses, without scheme, port or
// path. Matching is case-insensitive and ignores one trailing dot. "*"
// matches any host; "*.example.com" matches any name that ends in
// ".example.com" with at least one label before it (not "example.com"
// itself, and never an IP address); any other pattern matches exactly. An
// IPv6 pattern is written without brackets and matches any spelling of the
// same address. A url that does not parse, has no host, carries userinfo
// (which hides the real host from a reader: "https://team-a.example.com@evil.net")
// or whose host is neither an ASCII DNS name nor an IP address (write
// internationalised names in their xn-- form) fails every host check. A
// gRPC interface may give its url as a bare host:port, as the card linter
// allows; its host is matched like any other, but it names no scheme, so it
// fails require_https.
//
// Check expects the v1.0 shape that card.Load returns; it looks only at
// name and supportedInterfaces.
package policy

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/glob"
	"github.com/cardsign/cardsign/strictjson"
)

// RequireHTTPSRule is the Refusal.Rule of a refusal by the policy-wide https
// check of a policy without rules. No rule may take this name.
const RequireHTTPSRule = "require_https"

// knownRole reports whether s is a role cardsignd grants, so that a rule
// naming a misspelt role is a configuration error rather than dead.
func knownRole(s string) bool {
	switch s {
	case "signer", "admin", "auditor", "reader", "approver":
		return true
	}
	return false
}

// Config is the `policy:` section of cardsignd's YAML.
type Config struct {
	// Every supportedInterfaces[].url of a card must be https://, unless a
	// rule that allows the card says otherwise.
	RequireHTTPS *bool `yaml:"require_https"`
	// The rules: which cards whom may sign (permission rules), and what a
	// card may change (condition rules, with when). With none, any caller
	// with the signer role may sign any card.
	Rules []Rule `yaml:"rules"`
	// Approver groups a require_approval rule may name: identity globs
	// (token:NAME, cert:IDENTITY, oidc:ISSUER#SUBJECT). A member must also
	// hold the approver role.
	Groups map[string][]string `yaml:"groups"`
	// How long a request held for approval waits for its approvers (and
	// may then be signed) before it expires. Default 24h; 1s to 30 days.
	ApprovalTTL time.Duration `yaml:"approval_ttl"`
}

// DefaultApprovalTTL is Config.ApprovalTTL's default.
const DefaultApprovalTTL = 24 * time.Hour

// MaxApprovalTTL bounds Config.ApprovalTTL.
const MaxApprovalTTL = 30 * 24 * time.Hour

// Outcome is what a condition rule decides when its when holds.
type Outcome string

// The outcomes.
const (
	OutcomeAllow           Outcome = "allow"            // sign, and skip the condition rules after this one
	OutcomeDeny            Outcome = "deny"             // refuse, with the rule's message
	OutcomeRequireApproval Outcome = "require_approval" // hold until approvers approve this exact card
)

// ApprovalRule is how many approvers a require_approval rule needs.
type ApprovalRule struct {
	// Approvals needed (default 1, at most 16), each from a different
	// caller holding the approver role, never the requester.
	Count int `yaml:"count"`
	// A group of policy.groups the approvers must belong to; empty: any
	// approver.
	Group string `yaml:"group"`
	// How long a request this rule holds waits for approvers; default
	// policy.approval_ttl.
	TTL time.Duration `yaml:"ttl"`
}

// Rule lets the callers it applies to sign cards with the given names and
// interface hosts.
type Rule struct {
	// The rule's name (required, unique), named in refusals.
	Name string `yaml:"name"`
	// Glob patterns over the caller identity (token:NAME, cert:IDENTITY,
	// oidc:ISSUER#SUBJECT): the rule applies to callers matching one.
	Identities []string `yaml:"identities"`
	// The rule applies to callers holding any of these roles.
	Roles []string `yaml:"roles"`
	// Glob patterns over the card's name (required; "*" for any).
	CardNames []string `yaml:"card_names"`
	// Host patterns that the host of every supportedInterfaces[].url must
	// match one of (required; "*" for any). A URL with user@ before the
	// host is refused, and so is a gRPC host:port URL when https is
	// required.
	Hosts []string `yaml:"hosts"`
	// Overrides policy.require_https for the cards this rule allows.
	RequireHTTPS *bool `yaml:"require_https"`
	// Glob patterns over the caller's OIDC token claims (flattened:
	// repository, ref, kubernetes.io.namespace): every one must match, or
	// the rule refuses, naming the claim. A caller without claims (a
	// static token or a certificate) fails every claim.
	Claims map[string]string `yaml:"claims"`
	// Glob patterns over the registry agent ids the rule's callers may
	// register cards under by name (cardsign sign --register --agent ID).
	// Without them a caller registers only under the id derived from the
	// card's first interface URL, whose host the rule already checks: one
	// team cannot overwrite another's registry entry.
	AgentIDs []string `yaml:"agent_ids"`

	// When makes the rule a condition rule: a CEL expression over card,
	// previous, diff, caller and request (README "Signing policy rules in
	// CEL"). When it is true for a card the rule decides Outcome. A
	// condition rule takes no card_names, hosts, claims, agent_ids or
	// require_https; its identities and roles, when given, limit the
	// callers it applies to (default: every caller).
	When string `yaml:"when"`
	// Outcome is allow, deny or require_approval (a condition rule only).
	Outcome Outcome `yaml:"outcome"`
	// Message is what a deny or require_approval tells the caller.
	Message string `yaml:"message"`
	// Approvals configures require_approval.
	Approvals *ApprovalRule `yaml:"approvals"`
}

// Problem is one configuration error. Path is relative to the policy
// section, such as "rules[2].hosts[0]".
type Problem struct{ Path, Message string }

func (p Problem) String() string { return p.Path + ": " + p.Message }

// Policy is a compiled, immutable Config, safe for concurrent use. A nil
// *Policy is the default policy: no rules, https required.
type Policy struct {
	requireHTTPS bool
	rules        []rule      // permission rules, in configuration order
	conds        []condition // condition rules, in configuration order
	groups       map[string][]string
	approvalTTL  time.Duration
	adapter      types.Adapter // the CEL environment's, for the variables
}

type rule struct {
	name         string
	identities   []string
	roles        []string
	cardNames    []string
	hosts        []hostPattern
	hostsText    string // the configured host patterns, for refusals
	namesText    string // the configured card_names, for refusals
	requireHTTPS bool
	claims       []claimPattern // sorted by claim name, so refusals are deterministic
	agentIDs     []string
}

// claimPattern is one entry of Rule.Claims.
type claimPattern struct{ name, pattern string }

// Compile validates cfg and returns the policy, or every problem found (not
// just the first) and a nil policy.
func Compile(cfg Config) (*Policy, []Problem) {
	var probs []Problem
	add := func(path, format string, args ...any) {
		probs = append(probs, Problem{path, fmt.Sprintf(format, args...)})
	}
	p := &Policy{requireHTTPS: cfg.RequireHTTPS == nil || *cfg.RequireHTTPS, groups: map[string][]string{}, approvalTTL: cfg.ApprovalTTL}
	switch {
	case cfg.ApprovalTTL == 0:
		p.approvalTTL = DefaultApprovalTTL
	case cfg.ApprovalTTL < time.Second || cfg.ApprovalTTL > MaxApprovalTTL:
		add("approval_ttl", "%s: want 1s to %s (unset: %s)", cfg.ApprovalTTL, MaxApprovalTTL, DefaultApprovalTTL)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Groups)) {
		if msg := checkName(name); msg != "" {
			add("groups", "group name %s", msg)
		}
		if len(cfg.Groups[name]) == 0 {
			add("groups."+name, "group has no members; list identity patterns such as oidc:https://issuer#alice")
		}
		for j, s := range cfg.Groups[name] {
			if msg := checkGlob(s); msg != "" {
				add(fmt.Sprintf("groups.%s[%d]", name, j), "identity pattern %s", msg)
			}
		}
		p.groups[name] = slices.Clone(cfg.Groups[name])
	}
	env, err := newEnv()
	if err != nil {
		// The environment is fixed; it fails only on a programming error.
		add("rules", "CEL environment: %v", err)
		return nil, probs
	}
	p.adapter = env.CELTypeAdapter()
	seen := make(map[string]int)
	for i, r := range cfg.Rules {
		at := fmt.Sprintf("rules[%d]", i)
		switch j, dup := seen[r.Name]; {
		case r.Name == "":
			add(at+".name", "rule has no name; refusals name the rule that refused")
		case r.Name == RequireHTTPSRule:
			add(at+".name", "%q is reserved for the policy-wide https check", r.Name)
		case dup:
			add(at+".name", "duplicate rule name %q (also rules[%d])", r.Name, j)
		default:
			seen[r.Name] = i
		}
		if r.When != "" || r.Outcome != "" || r.Message != "" || r.Approvals != nil {
			if c, ok := compileCondition(env, at, r, cfg.Groups, add); ok {
				p.conds = append(p.conds, c)
			}
			continue
		}
		if len(r.Identities) == 0 && len(r.Roles) == 0 {
			add(at, "rule has neither identities nor roles, so it applies to no caller")
		}
		for j, s := range r.Identities {
			if msg := checkGlob(s); msg != "" {
				add(fmt.Sprintf("%s.identities[%d]", at, j), "identity pattern %s", msg)
			}
		}
		for j, s := range r.Roles {
			if !knownRole(s) {
				add(fmt.Sprintf("%s.roles[%d]", at, j), "unknown role %q (roles are signer, admin, auditor, reader, approver)", s)
			}
		}
		if len(r.CardNames) == 0 {
			add(at+".card_names", `no card names; use "*" for any name`)
		}
		for j, s := range r.CardNames {
			if msg := checkGlob(s); msg != "" {
				add(fmt.Sprintf("%s.card_names[%d]", at, j), "card name pattern %s", msg)
			}
		}
		if len(r.Hosts) == 0 {
			add(at+".hosts", `no hosts; use "*" for any host`)
		}
		hosts := make([]hostPattern, 0, len(r.Hosts))
		for j, s := range r.Hosts {
			h, msg := parseHostPattern(s)
			if msg != "" {
				add(fmt.Sprintf("%s.hosts[%d]", at, j), "%s", msg)
				continue
			}
			hosts = append(hosts, h)
		}
		https := p.requireHTTPS
		if r.RequireHTTPS != nil {
			https = *r.RequireHTTPS
		}
		for j, pat := range r.AgentIDs {
			if msg := checkGlob(pat); msg != "" {
				add(fmt.Sprintf("%s.agent_ids[%d]", at, j), "agent id pattern %s", msg)
			}
		}
		var claims []claimPattern
		for _, name := range slices.Sorted(maps.Keys(r.Claims)) {
			if msg := checkGlob(name); msg != "" {
				add(at+".claims", "claim name %s", msg)
			}
			if msg := checkGlob(r.Claims[name]); msg != "" {
				add(fmt.Sprintf("%s.claims.%s", at, name), "claim pattern %s", msg)
			}
			claims = append(claims, claimPattern{name: name, pattern: r.Claims[name]})
		}
		p.rules = append(p.rules, rule{
			name:         r.Name,
			identities:   slices.Clone(r.Identities),
			roles:        slices.Clone(r.Roles),
			cardNames:    slices.Clone(r.CardNames),
			hosts:        hosts,
			hostsText:    fmt.Sprint(r.Hosts),
			namesText:    fmt.Sprint(r.CardNames),
			requireHTTPS: https,
			claims:       claims,
			agentIDs:     slices.Clone(r.AgentIDs),
		})
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return p, nil
}

// checkGlob returns why s is not a usable identity or name pattern, or "".
func checkGlob(s string) string {
	switch {
	case s == "":
		return `is empty; use "*" to match anything`
	case strings.TrimSpace(s) != s:
		// Almost always a quoting slip in the YAML, and it would silently
		// match nothing.
		return fmt.Sprintf("%q has leading or trailing white space", s)
	case !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl):
		// Refusals print the patterns; they must stay one printable line.
		return fmt.Sprintf("%q has control characters or invalid UTF-8", s)
	}
	return ""
}

// Empty reports whether the policy has no rules (then only require_https
// applies).
func (p *Policy) Empty() bool { return p == nil || len(p.rules) == 0 }

// Caller is who asks for a signature.
type Caller struct {
	Identity string   // as cardsignd names callers: "token:NAME", "cert:IDENTITY" (a SPIFFE ID, DNS name or CN), "oidc:ISSUER#SUBJECT", or "anonymous"
	Roles    []string // roles the caller holds
	// Claims are an OIDC caller's token claims, flattened; nil for others.
	Claims map[string]string
	// Method is how the caller proved who it is: "token", "cert", "oidc"
	// or "none".
	Method string
	// Provenance is what an OIDC caller's token says about its pipeline
	// run (repository, ref, sha, run id, ...); nil for others.
	Provenance map[string]string
}

// Refusal is a card the policy does not let the caller sign.
type Refusal struct {
	Rule   string // the rule that refused; RequireHTTPSRule for the policy-wide https check; "" when no rule applies to the caller
	Path   string // the card field refused, such as "supportedInterfaces[1].url" or "name"; "" when no rule applies
	Reason string // why, in one line
}

func (r *Refusal) Error() string {
	switch r.Rule {
	case "":
		return "signing policy: " + r.Reason
	case RequireHTTPSRule:
		return "signing policy: require_https refuses " + r.Path + ": " + r.Reason
	}
	return "signing policy: rule " + strconv.Quote(r.Rule) + " refuses " + r.Path + ": " + r.Reason
}

// CheckAgent decides whether caller may register the card v under agent id
// (already allowed by Check) when id is not derived, the id derived from the
// card's own URL: some rule that applies to the caller and allows the card
// must list a matching agent_ids pattern. A policy without rules lets every
// signer register under any id, as it lets it sign any card.
func (p *Policy) CheckAgent(caller Caller, v strictjson.Value, id, derived string) error {
	if p.Empty() || id == derived {
		return nil
	}
	targets := interfaceTargets(v)
	for i := range p.rules {
		r := &p.rules[i]
		if !r.appliesTo(caller) || r.checkClaims(caller) != nil || r.check(v, targets) != nil {
			continue
		}
		if slices.ContainsFunc(r.agentIDs, func(pat string) bool { return glob.Match(pat, id) }) {
			return nil
		}
	}
	hint := "register without --agent to use the id derived from the card's URL"
	if derived != "" {
		hint += " (" + quote(derived) + ")"
	}
	return &Refusal{Path: "agent_id", Reason: fmt.Sprintf("no rule that allows this card lists agent id %s in its agent_ids for caller %s; %s, or add agent_ids to the rule",
		quote(id), quote(caller.Identity), hint)}
}

// Check decides whether caller may sign the card v (in the v1.0 shape that
// card.Load returns). It returns nil when the card is allowed and a
// *Refusal otherwise.
func (p *Policy) Check(caller Caller, v strictjson.Value) error {
	targets := interfaceTargets(v)
	if p.Empty() {
		if p != nil && !p.requireHTTPS {
			return nil
		}
		for _, t := range targets {
			if t.httpsBad != "" {
				return &Refusal{Rule: RequireHTTPSRule, Path: t.path, Reason: t.httpsBad}
			}
		}
		return nil
	}
	var first *Refusal
	refused := 0
	for i := range p.rules {
		r := &p.rules[i]
		if !r.appliesTo(caller) {
			continue
		}
		ref := r.checkClaims(caller)
		if ref == nil {
			ref = r.check(v, targets)
		}
		if ref == nil {
			return nil
		}
		if first == nil {
			first = ref
		}
		refused++
	}
	if first == nil {
		return &Refusal{Reason: "no signing policy rule applies to caller " + quote(caller.Identity)}
	}
	switch refused {
	case 1:
	case 2:
		first.Reason += " (1 other applicable rule also refused)"
	default:
		first.Reason += fmt.Sprintf(" (%d other applicable rules also refused)", refused-1)
	}
	return first
}

func (r *rule) appliesTo(c Caller) bool { return matchesCaller(r.identities, r.roles, c) }

// matchesCaller reports whether c's identity matches one of identities or
// c holds one of roles.
func matchesCaller(identities, roles []string, c Caller) bool {
	for _, pat := range identities {
		if glob.Match(pat, c.Identity) {
			return true
		}
	}
	for _, role := range c.Roles {
		if slices.Contains(roles, role) {
			return true
		}
	}
	return false
}

// checkClaims returns why r refuses the caller's claims, or nil when every
// claim the rule requires matches (or it requires none).
func (r *rule) checkClaims(c Caller) *Refusal {
	for _, cp := range r.claims {
		refuse := func(format string, args ...any) *Refusal {
			return &Refusal{Rule: r.name, Path: "claim " + cp.name, Reason: fmt.Sprintf(format, args...)}
		}
		got, ok := c.Claims[cp.name]
		switch {
		case c.Claims == nil:
			return refuse("caller %s has no token claims (only OIDC identity tokens carry them); the rule requires %s %s", quote(c.Identity), cp.name, quote(cp.pattern))
		case !ok:
			return refuse("the caller's token has no %s claim; the rule requires %s", cp.name, quote(cp.pattern))
		case !glob.Match(cp.pattern, got):
			return refuse("%s %s does not match %s", cp.name, quote(got), quote(cp.pattern))
		}
	}
	return nil
}

// check returns why r refuses the card, or nil when it allows it.
func (r *rule) check(v strictjson.Value, targets []target) *Refusal {
	refuse := func(path, format string, args ...any) *Refusal {
		return &Refusal{Rule: r.name, Path: path, Reason: fmt.Sprintf(format, args...)}
	}
	name, ok := v.Get("name")
	switch {
	case !ok:
		return refuse("name", "card has no name")
	case name.Kind != strictjson.String:
		return refuse("name", "name is %s %s, not a string", article(name.Kind), name.Kind)
	case !slices.ContainsFunc(r.cardNames, func(pat string) bool { return glob.Match(pat, name.Str) }):
		return refuse("name", "name %s is not in card_names %s", quote(name.Str), r.namesText)
	}
	for _, t := range targets {
		if t.hostBad != "" {
			return refuse(t.path, "%s", t.hostBad)
		}
		if !slices.ContainsFunc(r.hosts, t.matches) {
			return refuse(t.path, "host %s is not in hosts %s", quote(t.host), r.hostsText)
		}
		if r.requireHTTPS && t.httpsBad != "" {
			return refuse(t.path, "%s", t.httpsBad)
		}
	}
	return nil
}

// target is one supportedInterfaces[].url, analysed once per Check.
type target struct {
	path     string     // the card field, such as supportedInterfaces[1].url
	host     string     // lower case, without a trailing dot; valid when hostBad is ""
	addr     netip.Addr // the host as an address when it is an IP literal
	hostBad  string     // why no host pattern can match, or ""
	httpsBad string     // why the url is not https, or ""
}

func (t *target) matches(h hostPattern) bool {
	switch h.kind {
	case anyHost:
		return true
	case ipHost:
		return t.addr.IsValid() && t.addr == h.addr
	case suffixHost:
		return !t.addr.IsValid() && len(t.host) > len(h.name) && strings.HasSuffix(t.host, h.name)
	}
	return !t.addr.IsValid() && t.host == h.name
}

// interfaceTargets analyses every supportedInterfaces[].url of v. Shapes
// that lint would refuse become targets that fail every check, so that a
// card that skipped lint is refused rather than waved through.
func interfaceTargets(v strictjson.Value) []target {
	ifaces, ok := v.Get("supportedInterfaces")
	if !ok || ifaces.Kind == strictjson.Null {
		return nil
	}
	if ifaces.Kind != strictjson.Array {
		msg := fmt.Sprintf("supportedInterfaces is %s %s, not an array", article(ifaces.Kind), ifaces.Kind)
		return []target{{path: "supportedInterfaces", hostBad: msg, httpsBad: msg}}
	}
	out := make([]target, len(ifaces.Arr))
	for i, iface := range ifaces.Arr {
		out[i] = analyse(i, iface)
	}
	return out
}

func analyse(i int, iface strictjson.Value) target {
	t := target{path: fmt.Sprintf("supportedInterfaces[%d].url", i)}
	bad := func(msg string) target {
		t.hostBad, t.httpsBad = msg, msg
		return t
	}
	if iface.Kind != strictjson.Object {
		t.path = fmt.Sprintf("supportedInterfaces[%d]", i)
		return bad(fmt.Sprintf("interface is %s %s, not an object", article(iface.Kind), iface.Kind))
	}
	u, ok := iface.Get("url")
	switch {
	case !ok:
		return bad("interface has no url")
	case u.Kind != strictjson.String:
		return bad(fmt.Sprintf("url is %s %s, not a string", article(u.Kind), u.Kind))
	}
	raw := u.Str
	var host string
	if b, _ := iface.Get("protocolBinding"); b.Kind == strictjson.String && b.Str == "GRPC" && card.IsHostPort(raw) {
		// The card linter accepts host:port for gRPC. url.Parse would read
		// "agent.example.com:443" as scheme "agent.example.com".
		host, _, _ = net.SplitHostPort(raw)
		t.httpsBad = "url is a bare host:port, which names no scheme; write https://host:port"
	} else {
		pu, err := url.Parse(raw)
		if err != nil {
			// Name the parser's complaint, not the url: a malformed url may
			// still carry a password.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return bad("url does not parse: " + err.Error())
		}
		switch s := pu.Scheme; s {
		case "https":
		case "":
			t.httpsBad = "url has no scheme; it must be an absolute https URL"
		default:
			t.httpsBad = fmt.Sprintf("url scheme %s is not https", quote(s))
		}
		if pu.User != nil {
			// What a reader takes for the host ("team-a.example.com@evil.net")
			// is userinfo; the request goes to the host after '@'.
			t.hostBad = "url has userinfo (a user@ part before the host), which disguises the host it names"
			return t
		}
		host = pu.Hostname()
		if host == "" {
			t.hostBad = "url has no host; it must be an absolute URL such as https://agent.example.com/a2a"
			return t
		}
	}
	host = strings.ToLower(host)
	host = strings.TrimSuffix(host, ".")
	if a, err := netip.ParseAddr(host); err == nil {
		t.addr = a.Unmap()
		t.host = host
		return t
	}
	if msg := checkDNSName(host); msg != "" {
		t.hostBad = fmt.Sprintf("host %s is neither a DNS name nor an IP address: %s", quote(host), msg)
		return t
	}
	t.host = host
	return t
}

// quote renders untrusted text (identities, names, hosts) for a message:
// quoted so that it cannot forge log lines, and cut short so that a hostile
// card cannot make the message huge.
func quote(s string) string {
	const limit = 128
	if len(s) > limit {
		cut := limit
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func article(k strictjson.Kind) string {
	if k == strictjson.Array || k == strictjson.Object {
		return "an"
	}
	return "a"
}
