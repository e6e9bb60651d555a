package kubernetes

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// -update rewrites the values table of the chart's README from values.yaml.
var update = flag.Bool("update", false, "rewrite the values table in deploy/helm/cardsignd/README.md")

const (
	chartReadme = chartDir + "/README.md"
	tableBegin  = "<!-- values table: generated from values.yaml by `go test -run TestChartReadme -update` in deploy/kubernetes -->\n"
	tableEnd    = "<!-- end of values table -->\n"
)

// schemaLeaves lists the dotted paths of values.schema.json's values: a
// property with properties of its own is a section, any other a value.
func schemaLeaves(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		Properties map[string]*node `json:"properties"`
	}
	var root node
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	var leaves []string
	var walk func(prefix string, n *node)
	walk = func(prefix string, n *node) {
		for _, k := range sortedKeys(n.Properties) {
			c := n.Properties[k]
			if len(c.Properties) > 0 {
				walk(prefix+k+".", c)
			} else {
				leaves = append(leaves, prefix+k)
			}
		}
	}
	walk("", &root)
	return leaves
}

// valueDoc is one value of values.yaml: its path, its default, the comment
// above it.
type valueDoc struct {
	path, def, doc string
}

var keyLine = regexp.MustCompile(`^( *)([A-Za-z][A-Za-z0-9_-]*):`)

// valuesDocs reads values.yaml: for each value the schema knows, the
// comment that documents it ("# -- " and the comment lines that follow, right
// above the key) and its default.
func valuesDocs(t *testing.T, leaves []string) ([]valueDoc, []string) {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	var (
		docs     []valueDoc
		problems []string
		stack    []string // keys of the sections the line is in
		indents  []int
		comment  []string
		skipOver = -1 // inside a value's own block: lines indented deeper
	)
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if skipOver >= 0 && (trimmed == "" || indent > skipOver || strings.HasPrefix(trimmed, "- ")) {
			continue
		}
		skipOver = -1
		switch {
		case trimmed == "":
			comment = nil
			continue
		case strings.HasPrefix(trimmed, "# -- "):
			comment = []string{strings.TrimPrefix(trimmed, "# -- ")}
			continue
		case strings.HasPrefix(trimmed, "#"):
			if comment != nil {
				comment = append(comment, strings.TrimSpace(strings.TrimPrefix(trimmed, "#")))
			}
			continue
		}
		m := keyLine.FindStringSubmatch(line)
		if m == nil {
			problems = append(problems, fmt.Sprintf("values.yaml: %q is neither a key nor a comment", line))
			continue
		}
		for len(indents) > 0 && indents[len(indents)-1] >= indent {
			stack, indents = stack[:len(stack)-1], indents[:len(indents)-1]
		}
		path := strings.Join(append(slices.Clone(stack), m[2]), ".")
		if slices.Contains(leaves, path) {
			if comment == nil {
				problems = append(problems, fmt.Sprintf("values.yaml: %s has no `# -- ` comment right above it", path))
			}
			docs = append(docs, valueDoc{path: path, def: defaultOf(values, path), doc: strings.Join(comment, " ")})
			skipOver = indent
		} else {
			stack, indents = append(stack, m[2]), append(indents, indent)
		}
		comment = nil
	}
	for _, l := range leaves {
		if !slices.ContainsFunc(docs, func(d valueDoc) bool { return d.path == l }) {
			problems = append(problems, fmt.Sprintf("values.yaml: no default for %s, a value of values.schema.json", l))
		}
	}
	return docs, problems
}

// defaultOf renders the value at path for the table: JSON, or a pointer to
// values.yaml when it is long.
func defaultOf(values map[string]any, path string) string {
	var v any = values
	for _, k := range strings.Split(path, ".") {
		v = v.(map[string]any)[k]
	}
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return "see values.yaml"
	}
	return "`" + string(b) + "`"
}

// valuesTable is the README's table of every value.
func valuesTable(docs []valueDoc) string {
	var s strings.Builder
	s.WriteString(tableBegin + "\n| value | default | what |\n|---|---|---|\n")
	for _, d := range docs {
		fmt.Fprintf(&s, "| `%s` | %s | %s |\n", d.path, strings.ReplaceAll(d.def, "|", `\|`), strings.ReplaceAll(d.doc, "|", `\|`))
	}
	return s.String() + "\n" + tableEnd
}

// TestChartReadme: every value of values.schema.json has a default and a
// comment in values.yaml, and the README's values table is the one
// values.yaml makes (go test -run TestChartReadme -update rewrites it).
func TestChartReadme(t *testing.T) {
	leaves := schemaLeaves(t)
	if len(leaves) < 40 {
		t.Fatalf("values.schema.json: %d values found; the walk is broken", len(leaves))
	}
	docs, problems := valuesDocs(t, leaves)
	for _, p := range problems {
		t.Error(p)
	}
	b, err := os.ReadFile(chartReadme)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	begin, end := strings.Index(readme, tableBegin), strings.Index(readme, tableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s: no values table between %q and %q", chartReadme, tableBegin, tableEnd)
	}
	want := readme[:begin] + valuesTable(docs) + readme[end+len(tableEnd):]
	if want == readme {
		return
	}
	if *update {
		if err := os.WriteFile(chartReadme, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the values table differs from values.yaml: go test -run TestChartReadme -update", chartReadme)
}
