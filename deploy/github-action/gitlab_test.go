package githubaction

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/cardsign/cardsign/internal/oidctest"
	"github.com/cardsign/cardsign/internal/testbin"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// gitlabJob is the part of a .gitlab-ci.yml job this test runs.
type gitlabJob struct {
	Variables map[string]string `yaml:"variables"`
	IDTokens  map[string]struct {
		Aud string `yaml:"aud"`
	} `yaml:"id_tokens"`
	BeforeScript []string `yaml:"before_script"`
	Script       []string `yaml:"script"`
}

// runGitLabJob runs job as GitLab's shell executor with bash does: the
// job's variables, then the project's (which take precedence), the id
// tokens minted into the variables id_tokens names, and before_script and
// script as one bash script with errexit and pipefail, in the project's
// directory.
func runGitLabJob(t *testing.T, job gitlabJob, env, project map[string]string, mint func(aud string) string, dir string) (string, error) {
	t.Helper()
	all := map[string]string{"CI": "true", "GITLAB_CI": "true", "CI_PROJECT_DIR": dir, "CI_COMMIT_TAG": "v1.2.0"}
	for _, m := range []map[string]string{env, job.Variables, project} {
		for k, v := range m {
			all[k] = v
		}
	}
	for name, tok := range job.IDTokens {
		if tok.Aud == "" {
			t.Fatalf("id_tokens: %s has no aud", name)
		}
		all[name] = mint(tok.Aud)
	}
	script := strings.Join(append(slices.Clone(job.BeforeScript), job.Script...), "\n")
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = dir, envList(all)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	err := cmd.Run()
	return log.String(), err
}

// TestGitLabExample runs deploy/gitlab/cardsign.gitlab-ci.yml's job against
// the fixture the Action's test uses: the project's CI/CD variables point
// it at the release server and cardsignd and pin the test release's
// checksum, and GitLab's id token is minted by the stand-in GitLab issuer
// with the aud the job declares.
func TestGitLabExample(t *testing.T) {
	data := testsupport.ReadFile(t, filepath.Join(testbin.RepoRoot(), "deploy", "gitlab", "cardsign.gitlab-ci.yml"))
	var doc map[string]gitlabJob
	if err := yaml.Unmarshal([]byte(data), &doc); err != nil {
		t.Fatal(err)
	}
	job, ok := doc["sign-agent-card"]
	if !ok || len(job.Script) == 0 || len(job.IDTokens) == 0 {
		t.Fatalf("cardsign.gitlab-ci.yml: no job sign-agent-card with id_tokens and a script")
	}
	f := newFixture(t)
	pinned := f.publish(t, testVersion, nil, nil)
	// The JWKS is served with a certificate the job's image trusts: here,
	// cardsignd's CA among the roots.
	env := f.baseEnv(t)
	roots := testsupport.ReadFile(t, f.roots) + string(f.caPEM)
	env["SSL_CERT_FILE"] = testsupport.WriteFileMode(t, filepath.Join(t.TempDir(), "roots.pem"), roots, 0o644)
	caFile := testsupport.WriteFileMode(t, filepath.Join(t.TempDir(), "CARDSIGN_CA_FILE"), string(f.caPEM), 0o644)
	project := func(sha string) map[string]string {
		return map[string]string{"CARDSIGN_VERSION": testVersion, "CARDSIGN_ARCH": runtime.GOARCH, "CARDSIGN_SHA256": sha,
			"CARDSIGN_RELEASE_BASE_URL": f.baseURL, "CARDSIGN_SERVER": f.daemon.GRPC, "CARDSIGN_CA_FILE": caFile,
			"CARDSIGN_JWKS_URL": f.jwksURL}
	}
	gitlabToken := func(aud string) string { return f.gitlab.Mint(oidctest.GitLabClaims(aud)) }

	dir := t.TempDir()
	testsupport.WriteFileMode(t, filepath.Join(dir, "agent-card.json"), string(testsupport.Card(t, cardFile)), 0o644)
	log, err := runGitLabJob(t, job, env, project(pinned), gitlabToken, dir)
	if err != nil {
		t.Fatalf("the job failed: %v\n%s", err, log)
	}
	var result struct {
		Signatures []struct {
			KID           string `json:"kid"`
			AuditSequence int64  `json:"audit_sequence"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal([]byte(testsupport.ReadFile(t, filepath.Join(dir, "cardsign-result.json"))), &result); err != nil {
		t.Fatal(err)
	}
	kids := signedKIDs(t, filepath.Join(dir, "agent-card.signed.json"))
	if len(result.Signatures) != len(kids) || len(kids) == 0 {
		t.Fatalf("result %+v for the card's kids %v", result, kids)
	}
	for i, s := range result.Signatures {
		if s.KID != kids[i] || s.AuditSequence < 1 || !slices.Contains(f.jwksKIDs(t), s.KID) {
			t.Errorf("signature %d: result %+v, card's kid %s, JWKS %v", i, s, kids[i], f.jwksKIDs(t))
		}
	}

	for _, tc := range []struct {
		name  string
		sha   string
		token func(string) string
		want  string
	}{
		{"checksum not pinned", "", gitlabToken, "set CARDSIGN_SHA256"},
		{"checksum mismatch", strings.Repeat("0", 64), gitlabToken, "FAILED"},
		{"token for another audience", pinned, func(string) string { return gitlabToken("https://other.example.com") }, "identity token refused: audience"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			testsupport.WriteFileMode(t, filepath.Join(dir, "agent-card.json"), string(testsupport.Card(t, cardFile)), 0o644)
			log, err := runGitLabJob(t, job, env, project(tc.sha), tc.token, dir)
			if err == nil || !strings.Contains(log, tc.want) {
				t.Fatalf("err %v; want a failure saying %q:\n%s", err, tc.want, log)
			}
			if _, err := os.Stat(filepath.Join(dir, "cardsign-result.json")); err == nil {
				t.Error("a result was written")
			}
		})
	}
}
