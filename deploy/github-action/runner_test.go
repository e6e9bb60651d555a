package githubaction

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
	"go.yaml.in/yaml/v3"
)

// actionFile is action.yml as this test reads it. Decoding is strict: a key
// it does not know (a step's if:, uses:, with:, working-directory:) fails
// the test, because the runner below would not honour it.
type actionFile struct {
	Name        string                 `yaml:"name"`
	Description string                 `yaml:"description"`
	Author      string                 `yaml:"author"`
	Branding    map[string]string      `yaml:"branding"`
	Inputs      map[string]actionInput `yaml:"inputs"`
	Outputs     map[string]struct {
		Description string `yaml:"description"`
		Value       string `yaml:"value"`
	} `yaml:"outputs"`
	Runs struct {
		Using string       `yaml:"using"`
		Steps []actionStep `yaml:"steps"`
	} `yaml:"runs"`
}

type actionInput struct {
	Description string  `yaml:"description"`
	Required    bool    `yaml:"required"`
	Default     *string `yaml:"default"`
}

type actionStep struct {
	ID    string            `yaml:"id"`
	Shell string            `yaml:"shell"`
	Env   map[string]string `yaml:"env"`
	Run   string            `yaml:"run"`
}

func readAction(t *testing.T, name string) *actionFile {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var a actionFile
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &a
}

// expression is one ${{ ... }}; the evaluator knows exactly the forms
// action.yml may use, and refuses every other.
var (
	expression  = regexp.MustCompile(`\$\{\{(.*?)\}\}`)
	inputRef    = regexp.MustCompile(`^inputs\.([A-Za-z0-9_-]+)$`)
	stepOutRef  = regexp.MustCompile(`^steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)$`)
	contextRefs = map[string]func(*actionRun) string{
		"github.action_path": func(r *actionRun) string { return r.actionPath },
		"runner.temp":        func(r *actionRun) string { return r.env["RUNNER_TEMP"] },
	}
)

// actionRun is one run of the action in a job, as the runner does it for
// a composite action: steps in order, each a bash script in a file, with
// the step's env: evaluated; GITHUB_OUTPUT, GITHUB_ENV and GITHUB_PATH are
// fresh files per step, read back after it (outputs for later steps'
// expressions, variables and PATH entries for later steps' environment).
type actionRun struct {
	action     *actionFile
	actionPath string
	workspace  string
	inputs     map[string]string            // with: over the inputs' defaults
	env        map[string]string            // the job's environment, plus GITHUB_ENV
	paths      []string                     // GITHUB_PATH entries, newest first
	outputs    map[string]map[string]string // step id → its outputs
	log        bytes.Buffer                 // every step's output, as the job log
}

// eval substitutes the expressions in s.
func (r *actionRun) eval(s string) (string, error) {
	var errs []error
	out := expression.ReplaceAllStringFunc(s, func(m string) string {
		e := strings.TrimSpace(expression.FindStringSubmatch(m)[1])
		if g := inputRef.FindStringSubmatch(e); g != nil {
			if _, ok := r.action.Inputs[g[1]]; !ok {
				errs = append(errs, fmt.Errorf("%s: no such input", m))
			}
			return r.inputs[g[1]]
		}
		if g := stepOutRef.FindStringSubmatch(e); g != nil {
			if !slices.ContainsFunc(r.action.Runs.Steps, func(s actionStep) bool { return s.ID == g[1] }) {
				errs = append(errs, fmt.Errorf("%s: no step with id %s", m, g[1]))
			}
			return r.outputs[g[1]][g[2]]
		}
		if f, ok := contextRefs[e]; ok {
			return f(r)
		}
		errs = append(errs, fmt.Errorf("%s: only inputs.X, steps.ID.outputs.Y, github.action_path and runner.temp are evaluated here", m))
		return ""
	})
	return out, errors.Join(errs...)
}

// runAction runs the action at actionPath with the inputs with, in a job
// whose environment is env (RUNNER_TEMP and GITHUB_WORKSPACE are set here).
// It returns the action's outputs, the job log and the error of the step
// that failed, if one did (the runner stops there).
func runAction(t *testing.T, actionPath string, with, env map[string]string) (map[string]string, string, error) {
	t.Helper()
	a := readAction(t, filepath.Join(actionPath, "action.yml"))
	r := &actionRun{action: a, actionPath: actionPath, workspace: env["GITHUB_WORKSPACE"], inputs: map[string]string{},
		env: maps.Clone(env), outputs: map[string]map[string]string{}}
	for name, in := range a.Inputs {
		if in.Default != nil {
			r.inputs[name] = *in.Default
		}
	}
	for name, v := range with {
		if _, ok := a.Inputs[name]; !ok {
			t.Fatalf("with: %s is not an input of the action", name)
		}
		r.inputs[name] = v
	}
	tmp := t.TempDir()
	r.env["RUNNER_TEMP"] = tmp
	for i, step := range a.Runs.Steps {
		if err := r.step(t, tmp, i, step); err != nil {
			return nil, r.log.String(), err
		}
	}
	out := map[string]string{}
	for name, o := range a.Outputs {
		v, err := r.eval(o.Value)
		if err != nil {
			t.Fatalf("output %s: %v", name, err)
		}
		out[name] = v
	}
	return out, r.log.String(), nil
}

// step runs one step as the runner runs `shell: bash`.
func (r *actionRun) step(t *testing.T, tmp string, i int, step actionStep) error {
	t.Helper()
	if step.Shell != "bash" {
		t.Fatalf("step %d (%s): shell %q; this runner knows bash", i, step.ID, step.Shell)
	}
	env := maps.Clone(r.env)
	for k, v := range step.Env {
		ev, err := r.eval(v)
		if err != nil {
			t.Fatalf("step %s: env %s: %v", step.ID, k, err)
		}
		env[k] = ev
	}
	files := map[string]string{}
	for _, name := range []string{"GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH"} {
		files[name] = filepath.Join(tmp, fmt.Sprintf("%s_%d", strings.ToLower(name), i))
		if err := os.WriteFile(files[name], nil, 0o644); err != nil {
			t.Fatal(err)
		}
		env[name] = files[name]
	}
	env["GITHUB_ACTION_PATH"] = r.actionPath
	env["PATH"] = strings.Join(append(slices.Clone(r.paths), r.env["PATH"]), string(os.PathListSeparator))
	script := filepath.Join(tmp, fmt.Sprintf("step_%d.sh", i))
	if err := os.WriteFile(script, []byte(step.Run), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", script)
	cmd.Dir, cmd.Env = r.workspace, envList(env)
	cmd.Stdout, cmd.Stderr = &r.log, &r.log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("step %s: %w", step.ID, err)
	}
	outputs := readCommandFile(t, files["GITHUB_OUTPUT"])
	if step.ID != "" {
		r.outputs[step.ID] = outputs
	}
	maps.Copy(r.env, readCommandFile(t, files["GITHUB_ENV"]))
	for _, p := range strings.Split(testsupport.ReadFile(t, files["GITHUB_PATH"]), "\n") {
		if p = strings.TrimSpace(p); p != "" {
			r.paths = append([]string{p}, r.paths...)
		}
	}
	return nil
}

// readCommandFile reads GITHUB_OUTPUT or GITHUB_ENV as the runner does:
// NAME=VALUE lines, or NAME<<DELIMITER, the value's lines, DELIMITER.
func readCommandFile(t *testing.T, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	lines := strings.Split(testsupport.ReadFile(t, name), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if line == "" {
			continue
		}
		if k, delim, ok := strings.Cut(line, "<<"); ok && !strings.Contains(k, "=") {
			end := slices.Index(lines[i+1:], delim)
			if end < 0 {
				t.Fatalf("%s: %s<<%s is not closed", name, k, delim)
			}
			out[k] = strings.Join(lines[i+1:i+1+end], "\n")
			i += end + 1
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: line %q is neither NAME=VALUE nor NAME<<DELIMITER", name, line)
		}
		out[k] = v
	}
	return out
}
