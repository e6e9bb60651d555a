package catalog

import (
	"net/url"
	"strings"

	"github.com/cardsign/cardsign/strictjson"
)

// ReleaseExtension is the manifest extension in which cardsign states
// which registration a manifest is about: the agent, its registry version
// (a number that only grows: what a consumer keeps to refuse an older,
// correctly signed manifest), the card's canonical SHA-256 (hex, exactly
// what the revocation document lists when the card is revoked) and, for a
// card registered by a pipeline with an OIDC identity token, its commit,
// workflow and token issuer. The manifest signature covers it.
const ReleaseExtension = "dev.cardsign.release"

// Release is what a manifest says about a registration (ReleaseExtension)
// and where the card was built from (provenance publishedFrom).
type Release struct {
	AgentID         string
	Version         int64
	CanonicalSHA256 string // hex
	// Source is the repository URL (provenance publishedFrom); Commit,
	// Workflow and Issuer come from the pipeline's identity token. Empty
	// when unknown (a caller without OIDC).
	Source, Commit, Workflow, Issuer string
}

// Value is r as the ReleaseExtension's JSON object.
func (r Release) Value() strictjson.Value {
	v := strictjson.ObjectValue(
		strictjson.Member{Key: "agentId", Val: strictjson.StringValue(r.AgentID)},
		strictjson.Member{Key: "version", Val: strictjson.IntValue(r.Version)},
		strictjson.Member{Key: "canonicalSha256", Val: strictjson.StringValue(r.CanonicalSHA256)},
	)
	for _, m := range []struct{ k, v string }{{"commit", r.Commit}, {"workflow", r.Workflow}, {"issuer", r.Issuer}} {
		if m.v != "" {
			v.Obj = append(v.Obj, strictjson.Member{Key: m.k, Val: strictjson.StringValue(m.v)})
		}
	}
	return v
}

// githubIssuer is GitHub Actions' token issuer; its repository claim is
// "OWNER/REPO" on github.com.
const githubIssuer = "https://token.actions.githubusercontent.com"

// Pipeline is what a registration's audit record kept of the pipeline that
// asked (audit.DecodeProvenance of access/oidc's Token.Provenance): the
// source repository's URL, the commit, the workflow and the issuer.
// Nothing comes back for a caller without an identity token (p empty).
//
// The repository URL: GitHub's repository claim is OWNER/REPO on
// github.com (issuer token.actions.githubusercontent.com) or, for GitHub
// Enterprise Server (issuer https://HOST/_services/token), on HOST;
// GitLab's project_path is GROUP/PROJECT on the issuer's host. A claim
// that is not a plain path of [A-Za-z0-9._-] segments gives no URL rather
// than one built from hostile text.
func Pipeline(p map[string]string) (source, commit, workflow, issuer string) {
	if len(p) == 0 {
		return "", "", "", ""
	}
	issuer = p["iss"]
	commit = p["sha"]
	for _, k := range []string{"job_workflow_ref", "workflow_ref", "ci_config_ref_uri", "workflow"} {
		if workflow = p[k]; workflow != "" {
			break
		}
	}
	host := ""
	if u, err := url.Parse(issuer); err == nil && u.Scheme == "https" && u.Host != "" && u.User == nil {
		host = u.Host
	}
	if issuer == githubIssuer {
		host = "github.com"
	}
	repo := p["repository"]
	if repo == "" {
		repo = p["project_path"]
	}
	if host != "" && repoPath(repo) {
		source = "https://" + host + "/" + repo
	}
	return source, commit, workflow, issuer
}

// repoPath reports whether s is a repository path: 2–8 segments of
// [A-Za-z0-9._-], none "." or "..", at most 256 bytes.
func repoPath(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	segs := strings.Split(s, "/")
	if len(segs) < 2 || len(segs) > 8 {
		return false
	}
	for _, seg := range segs {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
	}
	return true
}
