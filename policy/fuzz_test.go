package policy

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/strictjson"
)

// FuzzCheck: Compile and Check never panic on any card, identity or
// pattern; every refusal is a one-line *Refusal; and a card that team A's
// rule allows really does point only at https hosts under
// team-a.example.com, judged by an independent reading of each url. Seeds
// are in testdata/fuzz/FuzzCheck.
func FuzzCheck(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, identity, namePattern, hostPattern string) {
		if len(identity)+len(namePattern) > 1024 {
			// Glob matching is O(len(pattern)·len(name)); configured
			// patterns are short, and long ones only slow the fuzzer down.
			return
		}
		l, err := card.Load(data, card.Options{Limits: strictjson.Limits{MaxBytes: 1 << 16, MaxDepth: 32}})
		if err != nil {
			return
		}
		v := l.Value
		caller := Caller{Identity: identity, Roles: []string{"signer"}}

		// Arbitrary patterns: Compile either refuses them or yields a
		// policy that Check can run.
		if p, probs := Compile(Config{Rules: []Rule{{Name: "fuzz", Identities: []string{identity}, CardNames: []string{namePattern}, Hosts: []string{hostPattern}}}}); len(probs) == 0 {
			checkRefusal(t, p.Check(caller, v))
		} else if p != nil {
			t.Fatalf("Compile returned a policy and problems %v", probs)
		}
		checkRefusal(t, (*Policy)(nil).Check(caller, v))

		p, probs := Compile(Config{Rules: []Rule{{Name: "team-a", Identities: []string{"*"}, CardNames: []string{"*"}, Hosts: []string{"*.team-a.example.com"}}}})
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		err = p.Check(caller, v)
		checkRefusal(t, err)
		if err != nil {
			return
		}
		ifaces, _ := v.Get("supportedInterfaces")
		for _, iface := range ifaces.Arr {
			raw, _ := iface.Get("url")
			u, err := url.Parse(raw.Str)
			if err != nil {
				t.Fatalf("allowed url %q does not parse: %v", raw.Str, err)
			}
			host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
			if u.Scheme != "https" || u.User != nil || !strings.HasSuffix(host, ".team-a.example.com") || host == ".team-a.example.com" {
				t.Fatalf("allowed url %q (scheme %q, host %q, userinfo %v) outside *.team-a.example.com over https", raw.Str, u.Scheme, host, u.User != nil)
			}
		}
	})
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	r, ok := err.(*Refusal)
	if !ok {
		t.Fatalf("Check returned %T, want *Refusal: %v", err, err)
	}
	if r.Reason == "" {
		t.Fatalf("refusal without a reason: %+v", r)
	}
	if msg := r.Error(); strings.ContainsAny(msg, "\r\n") {
		t.Fatalf("refusal spans lines: %q", msg)
	}
}

// FuzzCondition: any expression over any card either fails to compile with
// problems that name the rule's when, or compiles to a rule whose
// evaluation ends within the limits with a decision or an *EvalError,
// never a panic.
func FuzzCondition(f *testing.F) {
	f.Add("size(diff.hosts_added) > 0", `{"name":"a","skills":[{"id":"s"}]}`)
	f.Add("card.skills.exists(s, s.id.matches('^a+$'))", `{"skills":[{"id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"}]}`)
	f.Add("caller.claims.?ref.orValue('') == 'x' || previous.version > 1", `{"version":"2"}`)
	f.Add("[1,2,3].map(x, [x, x]).size() == 3", `[]`)
	f.Fuzz(func(t *testing.T, when, cardJSON string) {
		p, probs := Compile(Config{Rules: []Rule{{Name: "fuzz", When: when, Outcome: OutcomeDeny}}})
		if len(probs) > 0 {
			if p != nil {
				t.Fatal("a policy and problems")
			}
			for _, pr := range probs {
				if pr.Path != "rules[0].when" && pr.Path != "rules[0]" {
					t.Fatalf("problem at %s: %s", pr.Path, pr.Message)
				}
			}
			return
		}
		v, err := strictjson.Parse([]byte(cardJSON), strictjson.Limits{MaxBytes: 1 << 14, MaxDepth: 16})
		if err != nil {
			return
		}
		d, err := p.Decide(t.Context(), Input{Caller: Caller{Identity: "token:fuzz"}, Card: v, Previous: v})
		var ee *EvalError
		switch {
		case err != nil && !errors.As(err, &ee):
			t.Fatalf("Decide: %v, not an EvalError", err)
		case err != nil && d.Outcome != OutcomeDeny:
			t.Fatalf("an evaluation error decided %s, not deny", d.Outcome)
		case err == nil && d.Outcome != OutcomeAllow && d.Outcome != OutcomeDeny:
			t.Fatalf("outcome %q", d.Outcome)
		}
	})
}
