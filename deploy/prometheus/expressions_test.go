package prometheus

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// Files under test, relative to this directory.
const (
	rulesFile     = "cardsignd-alerts.yaml"
	dashboardFile = "../grafana/cardsignd.json"
	unitTestsFile = "cardsignd-alerts.test.yaml"
)

// expression is one PromQL expression and where it stands, for messages.
type expression struct {
	where string // "rule CardsigndDown", "panel \"Signing latency\" target B"
	expr  string
}

// newParser is Prometheus's PromQL parser with its default functions.
func newParser() parser.Parser { return parser.NewParser(parser.Options{}) }

// loadRules reads the alert rules with Prometheus's own rule loader, which
// also checks them as Prometheus does at start (unknown fields refused).
func loadRules(t *testing.T) []rulefmt.Rule {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, newParser(), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", rulesFile, errs)
	}
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no rules", rulesFile)
	}
	return rules
}

// ruleExpressions are the rules' expressions.
func ruleExpressions(rules []rulefmt.Rule) []expression {
	var out []expression
	for _, r := range rules {
		out = append(out, expression{where: "rule " + r.Alert + r.Record, expr: r.Expr})
	}
	return out
}

// dashboard is the part of a Grafana dashboard that holds PromQL: the
// panels' targets (rows nest panels) and the query variables.
type dashboard struct {
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type dashboardPanel struct {
	Title   string           `json:"title"`
	Panels  []dashboardPanel `json:"panels"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// labelValues matches Grafana's label_values(SELECTOR, LABEL) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[A-Za-z_][A-Za-z0-9_]*\)$`)

// dashboardExpressions reads every PromQL expression of the dashboard: each
// panel target's, and the selector of each label_values variable.
func dashboardExpressions(t *testing.T) []expression {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []expression
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s: panel %q target %s has no expression", dashboardFile, p.Title, tg.RefID)
					continue
				}
				out = append(out, expression{where: fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), expr: tg.Expr})
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("%s: variable %q: query: %v", dashboardFile, v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("%s: variable %q: want label_values(SELECTOR, LABEL), got %q", dashboardFile, v.Name, q.Query)
			continue
		}
		out = append(out, expression{where: fmt.Sprintf("variable %q", v.Name), expr: m[1]})
	}
	if len(out) == 0 {
		t.Fatalf("%s: no expressions", dashboardFile)
	}
	return out
}

// grafanaVariables are the dashboard's variables and built-ins, replaced by
// values PromQL accepts before parsing.
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "5m",
	"$__interval", "1m",
	"$__range", "1h",
	"${job}", ".*", "$job", ".*",
	"${instance}", ".*", "$instance", ".*",
)

// metricNames parses expr with Prometheus's parser and returns the metric
// names its selectors select, in order of appearance. A selector must name
// its metric (by name or an exact __name__ matcher): anything else could
// match series cardsignd does not export.
func metricNames(p parser.Parser, expr string) ([]string, error) {
	e, err := p.ParseExpr(grafanaVariables.Replace(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			bad = fmt.Errorf("selector %s names no metric", vs)
			return bad
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no metric selector in %q", expr)
	}
	return names, nil
}

func TestMetricNames(t *testing.T) {
	p := newParser()
	for _, tc := range []struct {
		expr    string
		want    []string
		wantErr string
	}{
		{expr: `up{job=~".*cardsignd.*"} == 0`, want: []string{"up"}},
		{expr: `histogram_quantile(0.99, sum by (le) (rate(cardsign_sign_duration_seconds_bucket[$__rate_interval])))`, want: []string{"cardsign_sign_duration_seconds_bucket"}},
		{expr: `sum(rate(a_total{job=~"$job"}[5m])) / sum(rate(b_total[5m])) > 0 and on() a_total`, want: []string{"a_total", "b_total"}},
		{expr: `{__name__="cardsign_ready"}`, want: []string{"cardsign_ready"}},
		{expr: `cardsign_tls_certificate_expiry_timestamp_seconds - time() < 14 * 86400`, want: []string{"cardsign_tls_certificate_expiry_timestamp_seconds"}},
		{expr: `{job="cardsignd"}`, wantErr: "names no metric"},
		{expr: `{__name__=~"cardsign_.*"}`, wantErr: "names no metric"},
		{expr: `time()`, wantErr: "no metric selector"},
		{expr: `sum(rate(x[5m]`, wantErr: "unclosed"},
	} {
		got, err := metricNames(p, tc.expr)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("metricNames(%q): err %v, want one containing %q", tc.expr, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
}

// TestExpressionsParse: every expression of the rules and of the dashboard
// parses with Prometheus's parser and names its metrics.
func TestExpressionsParse(t *testing.T) {
	p := newParser()
	exprs := append(ruleExpressions(loadRules(t)), dashboardExpressions(t)...)
	for _, e := range exprs {
		if _, err := metricNames(p, e.expr); err != nil {
			t.Errorf("%s: %q: %v", e.where, e.expr, err)
		}
	}
}

// unitTestSeries are the input series of the rules' promtool unit tests.
func unitTestSeries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(unitTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tests []struct {
			InputSeries []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", unitTestsFile, err)
	}
	var out []string
	for _, tc := range f.Tests {
		for _, s := range tc.InputSeries {
			out = append(out, s.Series)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no input series", unitTestsFile)
	}
	return out
}
