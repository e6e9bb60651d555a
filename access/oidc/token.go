package oidc

import (
	"encoding/json"
	"errors"
	"time"
)

// Token is a verified identity token.
type Token struct {
	// Issuer is the configured issuer the token came from; Subject the value
	// of its SubjectClaim.
	Issuer, Subject string
	// Claims are the token's claims flattened to strings: strings as they
	// are, numbers as their JSON text (so large IDs keep every digit),
	// booleans "true"/"false", nested objects as dotted paths
	// ("kubernetes.io.serviceaccount.name"). Arrays and nulls are left out:
	// a glob over a joined array would match in surprising ways, so an array
	// "aud" (Kubernetes) appears only through the audience check. Two claims
	// that flatten to one name refuse the token (duplicate_key).
	Claims map[string]string
	// Roles is the sorted union of the roles of matching RoleRules; empty
	// when none matched, and the caller then refuses every operation.
	Roles []string
	// Expiry is the token's exp.
	Expiry time.Time
}

// provenanceClaims are the claims worth keeping in an audit record: they say
// which pipeline, commit and run asked for a signature. Only these, so that
// records do not fill with e-mail addresses and other personal claims.
var provenanceClaims = []string{
	// GitHub Actions
	"repository", "ref", "sha", "workflow", "workflow_ref", "job_workflow_ref",
	"run_id", "run_attempt", "environment", "actor", "event_name",
	// GitLab CI (ref, sha and environment are shared with GitHub)
	"project_path", "namespace_path", "ref_type", "pipeline_id", "job_id",
	"user_login", "ci_config_ref_uri",
	// Kubernetes
	"kubernetes.io.namespace", "kubernetes.io.serviceaccount.name", "kubernetes.io.pod.name",
}

// Provenance returns iss, sub and those of the platform claims above that the
// token has, for the audit record.
func (t *Token) Provenance() map[string]string {
	out := ProvenanceOf(t.Claims)
	out["iss"] = t.Issuer
	if _, ok := t.Claims["sub"]; !ok {
		out["sub"] = t.Subject
	}
	return out
}

// ProvenanceOf is what the audit record keeps of flattened claims: iss, sub
// (the subject proper, even when SubjectClaim names another claim) and the
// platform claims above that they have. cardsign policy test builds a
// caller's provenance with it, as cardsignd does.
func ProvenanceOf(claims map[string]string) map[string]string {
	out := map[string]string{}
	for _, name := range append([]string{"iss", "sub"}, provenanceClaims...) {
		if v, ok := claims[name]; ok {
			out[name] = v
		}
	}
	return out
}

var errFlatDuplicate = errors.New("two claims flatten to the same name")

// flatten turns claims into Token.Claims and reports which names hold JSON
// strings (the subject must be one).
func flatten(claims map[string]any) (map[string]string, map[string]bool, error) {
	flat, strs := map[string]string{}, map[string]bool{}
	var walk func(prefix string, m map[string]any) error
	walk = func(prefix string, m map[string]any) error {
		for k, v := range m {
			name := prefix + k
			var s string
			switch x := v.(type) {
			case map[string]any:
				if err := walk(name+".", x); err != nil {
					return err
				}
				continue
			case string:
				s = x
				strs[name] = true
			case json.Number:
				s = x.String()
			case bool:
				s = "false"
				if x {
					s = "true"
				}
			default: // arrays and null
				continue
			}
			if _, dup := flat[name]; dup {
				return errFlatDuplicate
			}
			flat[name] = s
		}
		return nil
	}
	if err := walk("", claims); err != nil {
		return nil, nil, err
	}
	return flat, strs, nil
}

// Flatten turns a token's claims (decoded with json.Decoder.UseNumber) into
// Token.Claims as signing policy rules see them: nested objects as dotted
// names, arrays and null left out. cardsign policy test reads claims files
// with it.
func Flatten(claims map[string]any) (map[string]string, error) {
	flat, _, err := flatten(claims)
	return flat, err
}
