package prometheus

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/rulefmt"
)

// Pages the alerts and their runbook links refer to.
const (
	monitoringDoc = "../../docs/monitoring.md"
	operationsDoc = "../../docs/operations.md"
	// runbookBase is where every runbook_url points: a section of the
	// operations guide as GitHub renders it.
	runbookBase = "https://github.com/cardsign/cardsign/blob/main/docs/operations.md#"
)

var (
	// A metric row: | `NAME` | TYPE | `label`, `label` (or —) | meaning |
	metricRow = regexp.MustCompile("^\\| `(cardsign_[a-z0-9_]+)` \\| ([a-z]+) \\| ([^|]*) \\|")
	// An alert row: | `NAME` | SEVERITY | ...
	alertRow = regexp.MustCompile("^\\| `(Cardsignd[A-Za-z]+)` \\| ([a-z]+) \\|")
	backtick = regexp.MustCompile("`([^`]+)`")
	heading  = regexp.MustCompile(`^#{1,6} (.+)$`)
)

// documentedMetric is a row of the metrics table.
type documentedMetric struct{ kind, labels string }

// exportedMetric describes a family as scraped: its type and its label
// names, sorted and joined.
func exportedMetric(f *dto.MetricFamily) documentedMetric {
	var labels []string
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if !slices.Contains(labels, l.GetName()) {
				labels = append(labels, l.GetName())
			}
		}
	}
	sort.Strings(labels)
	return documentedMetric{kind: strings.ToLower(f.GetType().String()), labels: strings.Join(labels, ",")}
}

// githubAnchors are the anchors GitHub gives a Markdown page's headings:
// lower case, punctuation dropped, spaces as hyphens.
func githubAnchors(page string) map[string]bool {
	anchors := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		m := heading.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.ReplaceAll(m[1], "`", "")) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9'):
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}

func TestGithubAnchors(t *testing.T) {
	got := githubAnchors("# Operating cardsignd\n## 10. Alerts\n```\n# not a heading\n```\n### `cardsign keys` and you\n")
	for _, want := range []string{"operating-cardsignd", "10-alerts", "cardsign-keys-and-you"} {
		if !got[want] {
			t.Errorf("anchor %q missing from %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a comment in a code block became an anchor: %v", got)
	}
}

// checkMonitoringDoc compares docs/monitoring.md with what cardsignd
// exports (every cardsign_* family, with its type and labels, in the
// metrics table, and nothing more) and with the rules (every alert in the
// alerts table with its severity), and checks that each rule's runbook_url
// points to a section docs/operations.md has.
func checkMonitoringDoc(t *testing.T, families map[string]*dto.MetricFamily, rules []rulefmt.Rule) {
	b, err := os.ReadFile(monitoringDoc)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]documentedMetric{}
	alerts := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := metricRow.FindStringSubmatch(line); m != nil {
			var labels []string
			for _, l := range backtick.FindAllStringSubmatch(m[3], -1) {
				labels = append(labels, l[1])
			}
			sort.Strings(labels)
			if _, dup := documented[m[1]]; dup {
				t.Errorf("%s: %s has two rows", monitoringDoc, m[1])
			}
			documented[m[1]] = documentedMetric{kind: m[2], labels: strings.Join(labels, ",")}
		}
		if m := alertRow.FindStringSubmatch(line); m != nil {
			alerts[m[1]] = m[2]
		}
	}
	for name, f := range families {
		if !strings.HasPrefix(name, "cardsign_") {
			continue
		}
		want := exportedMetric(f)
		got, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("%s: cardsignd exports %s (%s, labels %q), which the metrics table lacks", monitoringDoc, name, want.kind, want.labels)
		case got != want:
			t.Errorf("%s: %s is documented as %s with labels %q; cardsignd exports a %s with labels %q", monitoringDoc, name, got.kind, got.labels, want.kind, want.labels)
		}
	}
	for name := range documented {
		if _, ok := families[name]; !ok {
			t.Errorf("%s: the metrics table lists %s, which cardsignd does not export", monitoringDoc, name)
		}
	}

	ops, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := githubAnchors(string(ops))
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		if sev, ok := alerts[r.Alert]; !ok {
			t.Errorf("%s: the alerts table lacks %s", monitoringDoc, r.Alert)
		} else if sev != r.Labels["severity"] {
			t.Errorf("%s: %s has severity %q in the table, %q in the rule", monitoringDoc, r.Alert, sev, r.Labels["severity"])
		}
		delete(alerts, r.Alert)
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s: %s has no %s annotation", rulesFile, r.Alert, a)
			}
		}
		switch sev := r.Labels["severity"]; sev {
		case "critical", "warning", "info":
		default:
			t.Errorf("%s: %s: severity %q, want critical, warning or info", rulesFile, r.Alert, sev)
		}
		url := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, runbookBase)
		if !ok || !anchors[anchor] {
			t.Errorf("%s: %s: runbook_url %q is not %sANCHOR of a heading in %s", rulesFile, r.Alert, url, runbookBase, operationsDoc)
		}
	}
	for name := range alerts {
		t.Errorf("%s: the alerts table lists %s, which %s does not define", monitoringDoc, name, rulesFile)
	}
}
