// Package githubaction holds no code: its tests check the GitHub Action
// (action.yml at the repository root, its scripts in this directory) and
// the GitLab CI example (deploy/gitlab), by running them as the CI systems
// would against real parts on loopback: release archives built by
// scripts/release on an HTTPS server, a cardsignd with TLS, OIDC issuers
// standing in for GitHub Actions (with its token endpoint) and GitLab.
package githubaction

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testbin"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// stepRun is the only form a step's run: may take: one call of a script of
// this directory, with no expression in it (inputs reach scripts through
// env:, so that no input is ever read as code).
var stepRun = regexp.MustCompile(`^"\$GITHUB_ACTION_PATH/deploy/github-action/([a-z-]+\.sh)"$`)

// TestActionDefinition checks action.yml's structure: a composite action
// whose inputs and outputs are all documented, whose steps are each one
// call of an executable bash script of this directory with set -euo
// pipefail, and which passes inputs only through env: with expressions the
// test's evaluator knows.
func TestActionDefinition(t *testing.T) {
	root := testbin.RepoRoot()
	a := readAction(t, filepath.Join(root, "action.yml"))
	if a.Runs.Using != "composite" || a.Name == "" || a.Description == "" {
		t.Fatalf("action.yml: runs.using %q, name %q, description %q; want a named, described composite action", a.Runs.Using, a.Name, a.Description)
	}
	for name, in := range a.Inputs {
		if strings.TrimSpace(in.Description) == "" {
			t.Errorf("input %s has no description", name)
		}
	}
	for name, o := range a.Outputs {
		if strings.TrimSpace(o.Description) == "" || !stepOutRef.MatchString(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(o.Value, "${{"), "}}"))) {
			t.Errorf("output %s: description %q, value %q; want a description and ${{ steps.ID.outputs.NAME }}", name, o.Description, o.Value)
		}
	}
	used := map[string]bool{}
	r := &actionRun{action: a, inputs: map[string]string{}, env: map[string]string{}}
	for i, s := range a.Runs.Steps {
		if s.ID == "" || s.Shell != "bash" {
			t.Errorf("step %d: id %q, shell %q; want an id and shell: bash", i, s.ID, s.Shell)
		}
		if strings.Contains(s.Run, "${{") {
			t.Errorf("step %s: run: holds an expression; pass it through env: (an input spliced into a script is script injection)", s.ID)
		}
		m := stepRun.FindStringSubmatch(strings.TrimSpace(s.Run))
		if m == nil {
			t.Errorf("step %s: run: %q; want one call \"$GITHUB_ACTION_PATH/deploy/github-action/NAME.sh\"", s.ID, s.Run)
			continue
		}
		script := filepath.Join(root, "deploy", "github-action", m[1])
		st, err := os.Stat(script)
		if err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("step %s: %s is missing or not executable (%v)", s.ID, m[1], err)
		} else if !strings.Contains(testsupport.ReadFile(t, script), "\nset -euo pipefail\n") {
			t.Errorf("step %s: %s does not set -euo pipefail", s.ID, m[1])
		}
		for k, v := range s.Env {
			if _, err := r.eval(v); err != nil {
				t.Errorf("step %s: env %s: %v", s.ID, k, err)
			}
			for _, g := range expression.FindAllStringSubmatch(v, -1) {
				if in := inputRef.FindStringSubmatch(strings.TrimSpace(g[1])); in != nil {
					used[in[1]] = true
				}
			}
		}
	}
	for name := range a.Inputs {
		if !used[name] {
			t.Errorf("input %s reaches no step", name)
		}
	}
	// The evaluator refuses what it does not know, so the test cannot pass
	// by ignoring an expression.
	for _, e := range []string{"${{ github.token }}", "${{ inputs.nope }}", "${{ steps.nope.outputs.x }}", "${{ format('{0}', inputs.card) }}"} {
		if _, err := r.eval(e); err == nil {
			t.Errorf("the evaluator accepted %s", e)
		}
	}
}

// job is a GitHub Actions job that uses the action: its workspace with
// the card, its tool cache, and the runner's environment.
type job struct {
	workspace, toolCache string
	env                  map[string]string
}

func (f *fixture) newJob(t *testing.T, idToken bool) *job {
	t.Helper()
	j := &job{workspace: t.TempDir(), toolCache: t.TempDir(), env: f.baseEnv(t)}
	testsupport.WriteFileMode(t, filepath.Join(j.workspace, "agent-card.json"), string(testsupport.Card(t, cardFile)), 0o644)
	arch := map[string]string{"amd64": "X64", "arm64": "ARM64"}[runtime.GOARCH]
	for k, v := range map[string]string{"RUNNER_OS": "Linux", "RUNNER_ARCH": arch, "RUNNER_TOOL_CACHE": j.toolCache,
		"GITHUB_WORKSPACE": j.workspace, "GITHUB_ACTIONS": "true"} {
		j.env[k] = v
	}
	if idToken { // permissions: id-token: write
		for k, v := range f.github.ActionsEnv() {
			j.env[k] = v
		}
	}
	return j
}

// actionDir is the action as the runner checks it out: action.yml and this
// directory, with pinned checksums added for the test's releases.
func actionDir(t *testing.T, pins map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "deploy", "github-action"), os.DirFS(".")); err != nil {
		t.Fatal(err)
	}
	testsupport.WriteFileMode(t, filepath.Join(dir, "action.yml"), testsupport.ReadFile(t, filepath.Join(testbin.RepoRoot(), "action.yml")), 0o644)
	for version, sum := range pins {
		testsupport.WriteFileMode(t, filepath.Join(dir, "deploy", "github-action", "checksums", version), sum+"  "+archive(version)+"\n", 0o644)
	}
	return dir
}

// TestActionSignsAndVerifies runs the action's steps as the runner does:
// cardsign is downloaded from the release server and checked against the
// pinned checksum, cardsign asks the Actions token endpoint for an identity
// token with the user's audience, cardsignd verifies it against the real
// issuer and signs, and the signed card verifies against the JWKS
// cardsignd publishes. Then the tool cache, registration and every refusal.
func TestActionSignsAndVerifies(t *testing.T) {
	f := newFixture(t)
	pins := map[string]string{testVersion: f.publish(t, testVersion, nil, nil)}
	// v0.0.2-test: the archive and its SHA256SUMS were both replaced.
	pins["v0.0.2-test"] = f.publish(t, "v0.0.2-test", func(b []byte) []byte { return append(b, 0) }, nil)
	// v0.0.3-test: the archive is intact but the release lists another sum.
	pins["v0.0.3-test"] = f.publish(t, "v0.0.3-test", nil, func(string) string { return strings.Repeat("0", 64) })
	action := actionDir(t, pins)
	caPEM := string(f.caPEM)

	j := f.newJob(t, true)
	with := map[string]string{"card": "agent-card.json", "server": f.daemon.GRPC, "audience": audience, "ca": caPEM,
		"version": testVersion, "release-base-url": f.baseURL, "verify": "true", "jwks-url": f.jwksURL}
	requests := f.github.ActionsRequests()
	out, log, err := runAction(t, action, with, j.env)
	if err != nil {
		t.Fatalf("the action failed: %v\n%s", err, log)
	}
	signed := filepath.Join(j.workspace, "agent-card.signed.json")
	if out["signed-card"] != "agent-card.signed.json" || out["verified"] != "true" {
		t.Fatalf("outputs %v; want signed-card agent-card.signed.json, verified true\n%s", out, log)
	}
	kids := signedKIDs(t, signed)
	unique := slices.Compact(slices.Sorted(slices.Values(kids)))
	if got := strings.Join(unique, ","); out["kids"] != got {
		t.Errorf("output kids %q, the signed card's signatures name %q", out["kids"], got)
	}
	for _, k := range kids {
		if !slices.Contains(f.jwksKIDs(t), k) {
			t.Errorf("kid %s is not in cardsignd's JWKS", k)
		}
	}
	seqs := strings.Split(out["audit-sequences"], ",")
	first, err := strconv.Atoi(out["audit-sequence"])
	if err != nil || first < 1 || seqs[0] != out["audit-sequence"] || len(seqs) != len(kids) {
		t.Errorf("audit-sequence %q, audit-sequences %q for %d signatures", out["audit-sequence"], out["audit-sequences"], len(kids))
	}
	if f.github.ActionsRequests() == requests {
		t.Error("the action signed without asking the Actions token endpoint")
	}
	if f.downloads.Load() != 2 {
		t.Errorf("%d downloads, want the archive and SHA256SUMS", f.downloads.Load())
	}
	// The card verifies for anyone with the JWKS, not only in the action.
	installed := filepath.Join(j.toolCache, "cardsign", strings.TrimPrefix(testVersion, "v"), runtime.GOARCH, "cardsign")
	if out["cardsign-path"] != installed {
		t.Errorf("cardsign-path %q, want %q", out["cardsign-path"], installed)
	}
	caFile := testsupport.WriteFileMode(t, filepath.Join(j.workspace, "ca.pem"), caPEM, 0o644)
	if r := runIn(t, f.baseEnv(t), j.workspace, installed, "verify", "--jwks", f.jwksURL, "--ca-file", caFile, signed); r.Code != 0 {
		t.Errorf("cardsign verify of the action's signed card: %s", r.Stderr)
	}

	t.Run("second job on the runner: tool cache, ca-file, register", func(t *testing.T) {
		j2 := f.newJob(t, true)
		j2.toolCache, j2.env["RUNNER_TOOL_CACHE"] = j.toolCache, j.toolCache
		testsupport.WriteFileMode(t, filepath.Join(j2.workspace, "ca.pem"), caPEM, 0o644)
		w := map[string]string{"card": "agent-card.json", "server": f.daemon.GRPC, "audience": audience, "ca-file": "ca.pem",
			"version": testVersion, "release-base-url": f.baseURL, "register": "true", "agent-id": "payments", "output": "signed.json"}
		before := f.downloads.Load()
		out, log, err := runAction(t, action, w, j2.env)
		if err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
		if f.downloads.Load() != before || !strings.Contains(log, "from the tool cache") {
			t.Errorf("cardsign downloaded again (%d requests) though the tool cache has it\n%s", f.downloads.Load()-before, log)
		}
		if out["agent-id"] != "payments" || out["agent-version"] == "" || out["signed-card"] != "signed.json" || out["verified"] != "false" {
			t.Errorf("outputs %v; want agent-id payments, an agent-version, signed-card signed.json, verified false", out)
		}
		if n, err := strconv.Atoi(out["audit-sequence"]); err != nil || n <= first {
			t.Errorf("audit-sequence %q after %d", out["audit-sequence"], first)
		}
		signedKIDs(t, filepath.Join(j2.workspace, "signed.json"))
	})

	// version source: the Action builds cardsign from its own checkout (here
	// the repository itself, as the runner checks it out for uses: …@SHA)
	// with the runner's Go, and signs with it.
	t.Run("version source builds from the checkout", func(t *testing.T) {
		js := f.newJob(t, true)
		for _, k := range []string{"GOCACHE", "GOMODCACHE"} { // setup-go's caches, as a runner would have them
			js.env[k] = goEnv(t, k)
		}
		for _, k := range []string{"GOFLAGS", "GOPROXY", "GOTOOLCHAIN"} {
			if v, ok := os.LookupEnv(k); ok {
				js.env[k] = v
			}
		}
		ws := map[string]string{"card": "agent-card.json", "server": f.daemon.GRPC, "audience": audience, "ca": caPEM, "version": "source"}
		out, log, err := runAction(t, testbin.RepoRoot(), ws, js.env)
		if err != nil {
			t.Fatalf("the action failed: %v\n%s", err, log)
		}
		if !strings.Contains(log, "building cardsign from the Action's checkout") || !strings.Contains(out["cardsign-path"], "cardsign-source") {
			t.Errorf("cardsign-path %q, log:\n%s", out["cardsign-path"], log)
		}
		signedKIDs(t, filepath.Join(js.workspace, "agent-card.signed.json"))
		// Without Go on PATH the step says what to add: a PATH with only
		// what the step runs before it looks for go.
		jn := f.newJob(t, true)
		jn.env["PATH"] = pathOf(t, "bash", "dirname")
		if _, log, err := runAction(t, testbin.RepoRoot(), ws, jn.env); err == nil || !strings.Contains(log, "actions/setup-go") {
			t.Errorf("without go on PATH: err %v, log:\n%s", err, log)
		}
	})

	t.Run("install-only", func(t *testing.T) {
		j3 := f.newJob(t, false)
		out, log, err := runAction(t, action, map[string]string{"install-only": "true", "version": testVersion, "release-base-url": f.baseURL}, j3.env)
		if err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
		if out["cardsign-path"] == "" || out["signed-card"] != "" || out["verified"] != "false" {
			t.Errorf("install-only outputs %v", out)
		}
		if r := runIn(t, f.baseEnv(t), j3.workspace, out["cardsign-path"], "help"); r.Code != 0 {
			t.Errorf("the installed cardsign does not run: %s", r.Stderr)
		}
	})

	// Each refusal: the action fails at the right step with a message
	// that says what is wrong, and nothing is installed or signed.
	marker := filepath.Join(t.TempDir(), "injected")
	for _, tc := range []struct {
		name    string
		idToken bool
		with    map[string]string
		want    []string
	}{
		{"archive and SHA256SUMS replaced", true, map[string]string{"version": "v0.0.2-test"},
			[]string{"checksum mismatch", "the Action pins " + pins["v0.0.2-test"], "refusing to install it"}},
		{"SHA256SUMS disagrees with the pin", true, map[string]string{"version": "v0.0.3-test"},
			[]string{"the release's SHA256SUMS lists", "refusing to install it"}},
		{"a version the action pins no checksums for", true, map[string]string{"version": "v9.9.9"},
			[]string{"pins no checksums for cardsign v9.9.9"}},
		{"no id-token permission", false, nil,
			[]string{"permissions: id-token: write"}},
		{"wrong audience", true, map[string]string{"audience": "https://other.example.com"},
			[]string{"identity token refused: audience", "cardsignd did not sign"}},
		{"verify without jwks-url", true, map[string]string{"verify": "true", "jwks-url": ""},
			[]string{"jwks-url is empty"}},
		{"not a boolean", true, map[string]string{"verify": "yes"},
			[]string{"input verify must be true or false, got yes"}},
		{"an input that is code", true, map[string]string{"card": `$(touch ` + marker + `)";touch ` + marker + `;"`},
			[]string{"input card: ", "is not a file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jn := f.newJob(t, tc.idToken)
			w := maps.Clone(with)
			maps.Copy(w, tc.with)
			_, log, err := runAction(t, action, w, jn.env)
			if err == nil {
				t.Fatalf("the action succeeded\n%s", log)
			}
			for _, s := range tc.want {
				if !strings.Contains(log, s) {
					t.Errorf("the log lacks %q:\n%s", s, log)
				}
			}
			if _, err := os.Stat(filepath.Join(jn.workspace, "agent-card.signed.json")); err == nil {
				t.Error("a signed card was written")
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("an input ran as code")
			}
			if strings.Contains(log, f.github.ActionsRequestToken()) {
				t.Error("the request token appears in the log")
			}
		})
	}
}

// pathOf is a PATH directory holding only the named commands.
func pathOf(t *testing.T, cmds ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, c := range cmds {
		p, err := exec.LookPath(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(dir, c)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goEnv is the value of one of go env's variables.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// runIn runs bin with args in dir with exactly the environment env.
func runIn(t *testing.T, env map[string]string, dir, bin string, args ...string) testbin.Result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, envList(env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return testbin.Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()}
}
