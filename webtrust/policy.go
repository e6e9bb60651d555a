package webtrust

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cardsign/cardsign/aicatalog"
	"github.com/cardsign/cardsign/transparency"
)

// maxPolicyBytes caps a trust policy file: it is a few rules, not data.
const maxPolicyBytes = 1 << 20

// Policy is a trust policy: which keys to trust for which hosts. Rules are
// tried in order; the first whose pattern matches a host is its rule, and a
// host no rule matches is trusted for nothing.
type Policy struct {
	Rules []Rule
}

// Rule is what to trust for the hosts its pattern matches. Exactly one of
// JWKS and DID names the trusted keys.
type Rule struct {
	// Host is an exact host name (agents.example.com) or "*." and a
	// domain (*.example.com: any name below example.com, not the
	// domain itself).
	Host string
	// JWKS is a JWK Set: an https URL or a file. DID is a root did:web
	// DID whose DID document's assertionMethod P-256 keys are trusted,
	// each under its fragment as kid.
	JWKS string
	DID  string
	// Revocations is the signed revocation document (https URL or file),
	// verified with the trusted keys; MaxRevocationsAge, when set,
	// refuses one issued longer ago than that.
	Revocations       string
	MaxRevocationsAge time.Duration
	// LogKey is the transparency log's key (ORIGIN+HASH+BASE64, a file
	// of such keys or an https URL); with RequireLogProof a signature
	// counts only with an inclusion proof the key vouches for.
	LogKey          string
	RequireLogProof bool
	// Witnesses are the witnesses whose cosignatures the log's checkpoints
	// need (a witness key NAME+HASH+BASE64, a file of such keys or an
	// https URL); with them a signature counts only with an inclusion
	// proof whose checkpoint carries WitnessQuorum of their cosignatures
	// (0: all of them). They need LogKey.
	Witnesses     string
	WitnessQuorum int
	// CatalogSigner, when set, is the did:web DID a catalog from these
	// hosts must be signed by.
	CatalogSigner string
	// Line is where the rule starts in its file.
	Line int
}

// LoadPolicy reads a trust policy file (YAML). Unknown fields, a rule with
// both or neither of jwks and did, bad host patterns and missing files
// are refused with FILE:LINE and the field. Relative file names in it are
// relative to the policy file's directory.
func LoadPolicy(path string) (*Policy, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("trust policy: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("trust policy %s: not a regular file", path)
	}
	if st.Size() > maxPolicyBytes {
		return nil, fmt.Errorf("trust policy %s: %d bytes, over %d", path, st.Size(), maxPolicyBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trust policy: %w", err)
	}
	return ParsePolicy(path, data)
}

// ParsePolicy reads a trust policy from data; name is the file it came
// from (for messages, and the base of relative file names).
func ParsePolicy(name string, data []byte) (*Policy, error) {
	p := &policyParser{name: name, dir: filepath.Dir(name)}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("trust policy %s: %w", name, err)
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, fmt.Errorf("trust policy %s: empty: want a rules: list", name)
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return nil, p.errorf(doc, "", "want a mapping with rules:")
	}
	pol := &Policy{}
	seen := false
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		if k.Value != "rules" {
			return nil, p.errorf(k, k.Value, "unknown field (the policy has rules: only)")
		}
		seen = true
		if v.Kind != yaml.SequenceNode {
			return nil, p.errorf(v, "rules", "want a list of rules")
		}
		for j, rn := range v.Content {
			r, err := p.rule(rn, fmt.Sprintf("rules[%d]", j))
			if err != nil {
				return nil, err
			}
			pol.Rules = append(pol.Rules, r)
		}
	}
	if !seen || len(pol.Rules) == 0 {
		return nil, fmt.Errorf("trust policy %s: no rules: a policy that trusts nothing refuses every host", name)
	}
	return pol, nil
}

type policyParser struct {
	name, dir string
}

func (p *policyParser) errorf(n *yaml.Node, field, format string, args ...any) error {
	where := fmt.Sprintf("%s:%d", p.name, n.Line)
	if field != "" {
		where += ": " + field
	}
	return fmt.Errorf("trust policy %s: %s", where, fmt.Sprintf(format, args...))
}

// rule reads one rule at path.
func (p *policyParser) rule(n *yaml.Node, path string) (Rule, error) {
	r := Rule{Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return r, p.errorf(n, path, "want a mapping (host:, and jwks: or did:)")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		field := path + "." + k.Value
		if seen[k.Value] {
			return r, p.errorf(k, field, "given twice")
		}
		seen[k.Value] = true
		if v.Kind != yaml.ScalarNode {
			return r, p.errorf(v, field, "want a single value")
		}
		var err error
		switch k.Value {
		case "host":
			r.Host, err = checkPattern(v.Value)
		case "jwks":
			r.JWKS, err = p.source(v.Value, false)
		case "did":
			r.DID = v.Value
			_, err = aicatalog.DomainOf(v.Value)
		case "revocations":
			r.Revocations, err = p.source(v.Value, false)
		case "max_revocations_age":
			r.MaxRevocationsAge, err = time.ParseDuration(v.Value)
			if err == nil && r.MaxRevocationsAge <= 0 {
				err = errors.New("must be a positive duration such as 24h")
			}
		case "log_key":
			r.LogKey, err = p.source(v.Value, true)
		case "require_log_proof":
			err = v.Decode(&r.RequireLogProof)
		case "witnesses":
			r.Witnesses = v.Value
			if _, kerr := transparency.ParseWitnessKey(v.Value); kerr != nil {
				r.Witnesses, err = p.source(v.Value, false)
			}
		case "witness_quorum":
			err = v.Decode(&r.WitnessQuorum)
			if err == nil && r.WitnessQuorum < 1 {
				err = errors.New("must be at least 1")
			}
		case "catalog_signer":
			r.CatalogSigner = v.Value
			_, err = aicatalog.DomainOf(v.Value)
		default:
			return r, p.errorf(k, field, "unknown field (a rule has host, jwks, did, revocations, max_revocations_age, log_key, require_log_proof, witnesses, witness_quorum, catalog_signer)")
		}
		if err != nil {
			return r, p.errorf(v, field, "%q: %v", v.Value, err)
		}
	}
	switch {
	case r.Host == "":
		return r, p.errorf(n, path+".host", "missing: every rule names the hosts it is for")
	case (r.JWKS == "") == (r.DID == ""):
		return r, p.errorf(n, path, "give exactly one of jwks: (a JWK Set) and did: (a did:web DID) as the trust anchor")
	case r.MaxRevocationsAge > 0 && r.Revocations == "":
		return r, p.errorf(n, path+".max_revocations_age", "set without revocations:")
	case r.RequireLogProof && r.LogKey == "":
		return r, p.errorf(n, path+".require_log_proof", "needs log_key: a proof is checked against the log's key")
	case r.Witnesses != "" && r.LogKey == "":
		return r, p.errorf(n, path+".witnesses", "needs log_key: witnesses vouch for the log's checkpoints, which its key signs")
	case r.WitnessQuorum != 0 && r.Witnesses == "":
		return r, p.errorf(n, path+".witness_quorum", "set without witnesses:")
	}
	return r, nil
}

// source checks an https URL or a file (made relative to the policy's
// directory, and required to exist). A log key may also be given inline.
func (p *policyParser) source(s string, logKey bool) (string, error) {
	if s == "" {
		return "", errors.New("empty")
	}
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return "", err
		}
		if u.Scheme != "https" || u.Host == "" {
			return "", errors.New("a URL must be https://HOST/…")
		}
		return s, nil
	}
	if logKey {
		if _, err := transparency.ParseVerifierKeys(s); err == nil {
			return s, nil
		}
	}
	path := s
	if !filepath.IsAbs(path) {
		path = filepath.Join(p.dir, path)
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("no such file %s (give an https URL or an existing file)", path)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	return path, nil
}

// checkPattern checks a host pattern: a host name, or "*." and a domain.
func checkPattern(s string) (string, error) {
	name := strings.TrimPrefix(s, "*.")
	if strings.Contains(name, "*") {
		return "", errors.New("a wildcard is allowed only as the whole first label (*.example.com)")
	}
	if err := aicatalog.CheckDomain(name); err != nil {
		return "", err
	}
	return s, nil
}

// Match returns the first rule whose pattern matches host (a host name,
// without port), or nil.
func (p *Policy) Match(host string) *Rule {
	if p == nil {
		return nil
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for i := range p.Rules {
		pat := p.Rules[i].Host
		if suffix, ok := strings.CutPrefix(pat, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return &p.Rules[i]
			}
		} else if host == pat {
			return &p.Rules[i]
		}
	}
	return nil
}
