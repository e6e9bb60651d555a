package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cardsign/cardsign/access/oidc"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/carddiff"
	"github.com/cardsign/cardsign/policy"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/strictjson"
)

func policyCmd() command {
	c := command{
		name:    "policy",
		long:    policyLong,
		summary: "Evaluate cardsignd's signing policy offline: which rule decides a card, and why.",
		usage: "test --config FILE --card FILE [--previous FILE] [--identity ID] [--roles ROLE,...] [--claims FILE]\n" +
			"       [--agent ID] [--register] [--visibility public|private] [--profile P] [--expect allow|deny|require_approval]",
		example: "  cardsign policy test --config cardsignd.yaml --card agent-card.json --previous deployed-card.json \\\n" +
			"      --identity 'oidc:https://token.actions.githubusercontent.com#repo:org/payments:ref:refs/heads/main' --claims claims.json\n" +
			"  permission rules: allowed\n" +
			"  condition rule new-host: true\n" +
			"  decision: require_approval by rule \"new-host\" (2 approvals from group \"security\"): a new host needs the security team\n" +
			"  cardsign policy test --config cardsignd.yaml --card agent-card.json --expect allow   # in the policy repository's CI",
	}
	c.subcommands = true
	c.subs = []subcommand{{"test", "evaluate the permission rules, then the condition rules, over a card (and its previous version) for a caller"}}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		o := &policyTest{}
		fs.StringVar(&o.config, "config", "", "cardsignd's configuration file (its policy section is read; required)")
		fs.StringVar(&o.card, "card", "", "the card to sign (required; - for standard input)")
		fs.StringVar(&o.previous, "previous", "", "the agent's latest registered card (default: none, a first version)")
		fs.StringVar(&o.identity, "identity", "anonymous", "the caller's identity: token:NAME, cert:IDENTITY or oidc:ISSUER#SUBJECT")
		fs.StringVar(&o.roles, "roles", "signer", "the caller's roles, comma-separated")
		fs.StringVar(&o.claims, "claims", "", "a JSON file with the caller's identity token claims (its payload); flattened as cardsignd flattens them")
		fs.StringVar(&o.agent, "agent", "", "the agent id (default: derived from the card's first interface URL)")
		fs.BoolVar(&o.register, "register", false, "the request registers the card (request.register)")
		fs.StringVar(&o.visibility, "visibility", "", "the request's visibility (request.visibility)")
		fs.StringVar(&o.profile, "profile", "", "the request's canonical profile (request.profile): spec, sdk, python-ascii, both or empty")
		fs.StringVar(&o.expect, "expect", "", "exit 1 unless the decision is this: allow, deny or require_approval")
		return o.run
	}
	return c
}

// policyTest is the flags of policy test.
type policyTest struct {
	config, card, previous, identity, roles, claims, agent, visibility, expect, profile string
	register                                                                            bool
}

func (o *policyTest) run(ctx context.Context, in *call) int {
	switch {
	case in.sub != "test":
		return in.usageError("unknown subcommand %q", in.sub)
	case len(in.pos) > 0:
		return in.usageError("unexpected argument %q", in.pos[0])
	case o.config == "" || o.card == "":
		return in.usageError("test needs --config FILE and --card FILE")
	case o.expect != "" && o.expect != "allow" && o.expect != "deny" && o.expect != "require_approval":
		return in.usageError("--expect wants allow, deny or require_approval, got %q", o.expect)
	}
	pol, err := loadPolicy(o.config)
	if err != nil {
		fmt.Fprintf(in.stderr, "cardsign policy test: %v\n", err)
		return exitUsage
	}
	input, err := o.input(in.env)
	if err != nil {
		fmt.Fprintf(in.stderr, "cardsign policy test: %v\n", err)
		return exitUsage
	}
	got := decide(ctx, in.stdout, pol, input)
	for _, l := range input.Diff.Lines() {
		fmt.Fprintf(in.stdout, "  diff: %s\n", escapeText(l))
	}
	if o.expect != "" && got != o.expect {
		fmt.Fprintf(in.stderr, "cardsign policy test: the decision is %s, expected %s\n", got, o.expect)
		return exitFail
	}
	return exitOK
}

// decide prints the permission rules' verdict and every condition rule's
// part, and returns the outcome.
func decide(ctx context.Context, w io.Writer, pol *policy.Policy, in policy.Input) string {
	if err := pol.Check(in.Caller, in.Card); err != nil {
		fmt.Fprintf(w, "permission rules: refused: %s\ndecision: deny\n", escapeText(err.Error()))
		return string(policy.OutcomeDeny)
	}
	fmt.Fprintln(w, "permission rules: allowed")
	d, err := pol.Decide(ctx, in)
	for _, s := range d.Trace {
		fmt.Fprintf(w, "condition rule %s: %s\n", escapeValue(s.Rule), escapeText(s.Result))
	}
	switch {
	case err != nil:
		// An evaluation error, or the run interrupted: never an allow.
		fmt.Fprintf(w, "decision: deny (fail closed): %s\n", escapeText(err.Error()))
		return string(policy.OutcomeDeny)
	case d.Rule == "":
		fmt.Fprintln(w, "decision: allow (no condition rule holds)")
	case d.Outcome == policy.OutcomeRequireApproval:
		group := ""
		if d.Group != "" {
			group = fmt.Sprintf(" from group %q", d.Group)
		}
		fmt.Fprintf(w, "decision: require_approval by rule %q (%d approvals%s): %s\n", d.Rule, d.Approvals, group, escapeText(d.Message))
	default:
		fmt.Fprintf(w, "decision: %s by rule %q: %s\n", d.Outcome, d.Rule, escapeText(d.Message))
	}
	return string(d.Outcome)
}

// loadPolicy reads the policy section of a cardsignd configuration file
// and compiles it as cardsignd does.
func loadPolicy(name string) (*policy.Policy, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Policy policy.Config `yaml:"policy"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	pol, probs := policy.Compile(cfg.Policy)
	if len(probs) > 0 {
		var b strings.Builder
		for _, p := range probs {
			fmt.Fprintf(&b, "\n  policy.%s", p)
		}
		return nil, fmt.Errorf("%s: the signing policy does not compile (cardsignd --check-config gives the file's lines):%s", name, b.String())
	}
	return pol, nil
}

// input reads the card, its previous version and the caller.
func (o *policyTest) input(e env) (policy.Input, error) {
	cur, err := loadCardFile(e, o.card, true)
	if err != nil {
		return policy.Input{}, fmt.Errorf("--card: %w", err)
	}
	var prev strictjson.Value
	if o.previous != "" {
		if prev, err = loadCardFile(e, o.previous, false); err != nil {
			return policy.Input{}, fmt.Errorf("--previous: %w", err)
		}
	}
	// As cardsignd names the ways callers prove who they are.
	method, _, _ := strings.Cut(o.identity, ":")
	if o.identity == "anonymous" {
		method = "none"
	}
	caller := policy.Caller{Identity: o.identity, Method: method}
	for _, r := range strings.Split(o.roles, ",") {
		if r = strings.TrimSpace(r); r != "" {
			caller.Roles = append(caller.Roles, r)
		}
	}
	if o.claims != "" {
		if caller.Claims, err = readClaims(o.claims); err != nil {
			return policy.Input{}, fmt.Errorf("--claims: %w", err)
		}
		caller.Method, caller.Provenance = "oidc", oidc.ProvenanceOf(caller.Claims)
	}
	agent := o.agent
	if agent == "" {
		agent, _ = registry.DeriveAgentID(cur)
	}
	return policy.Input{Caller: caller, Card: cur, Previous: prev, Diff: carddiff.Compute(cur, prev),
		Request: policy.Request{AgentID: agent, Register: o.register, Visibility: o.visibility, Profile: o.profile}}, nil
}

// loadCardFile reads a card as cardsignd does (v0.3 mapped to v1.0, keys
// outside the schema dropped), linted when lint is set (cardsignd refuses
// a card that fails lint before its policy sees it), and drops its
// signatures, which no rule compares.
func loadCardFile(e env, name string, lint bool) (strictjson.Value, error) {
	data, err := readInput(e, name, strictjson.DefaultMaxBytes+1)
	if err != nil {
		return strictjson.Value{}, err
	}
	opts := card.Options{StripUnknown: true}
	var l *card.Loaded
	if lint {
		p, err := signer.Prepare(data, signer.PrepareOptions{Card: opts})
		if err != nil {
			return strictjson.Value{}, err
		}
		l = p.Loaded
	} else if l, err = card.Load(data, opts); err != nil {
		return strictjson.Value{}, err
	}
	return carddiff.Unsigned(l.Value), nil
}

// readClaims reads an identity token's claims (a JSON object) and flattens
// them.
func readClaims(name string) (map[string]string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var claims map[string]any
	if err := dec.Decode(&claims); err != nil {
		return nil, err
	}
	if claims == nil {
		return nil, errors.New("want a JSON object of claims")
	}
	return oidc.Flatten(claims)
}

const policyLong = `test evaluates the signing policy of a cardsignd configuration file as cardsignd does for one request:
first the permission rules (who may sign which names and hosts), then the condition rules in their
order (CEL over card, previous, diff, caller and request); the first condition rule whose when is
true decides. It prints each rule's part, the decision and what the card changes against --previous.

Use it in the policy repository's CI with --expect, one call per case. No daemon is needed.

Exit codes: 0 the decision is printed (and matches --expect); 1 it does not match --expect; 2 usage,
an unreadable file, or a policy that does not compile.`
