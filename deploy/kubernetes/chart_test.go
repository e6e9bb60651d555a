package kubernetes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// chartDir is the Helm chart, rendered here with Helm's Go library as
// `helm template cardsignd deploy/helm/cardsignd -n cardsign -f EXAMPLE`
// would render it (no helm binary).
const chartDir = "../helm/cardsignd"

// The release every test renders: its name makes the objects' names those
// of the kustomize base (cardsignd-grpc, cardsignd-jwks…), so the same
// checks apply.
const releaseName = "cardsignd"

// kubeVersion is the oldest Kubernetes the chart supports (Chart.yaml's
// kubeVersion: the preStop sleep action): the render assumes it, as
// `helm template --kube-version` would. Without it Helm's library assumes
// v1.20, which the chart refuses.
var kubeVersion = func() *chartutil.KubeVersion {
	v, err := chartutil.ParseKubeVersion("v1.30.0")
	if err != nil {
		panic(err)
	}
	return v
}()

// chartExamples are the example values files the chart ships, each with
// the key backend its config must name.
var chartExamples = []kustomization{
	{dir: "examples/embedded-default.yaml", backend: "file", chart: true},
	{dir: "examples/postgres-replicas.yaml", backend: "gcpkms", saAnnotation: "iam.gke.io/gcp-service-account", chart: true},
	{dir: "examples/gcp-kms.yaml", backend: "gcpkms", saAnnotation: "iam.gke.io/gcp-service-account", chart: true},
	{dir: "examples/aws-kms.yaml", backend: "awskms", saAnnotation: "eks.amazonaws.com/role-arn", chart: true},
	{dir: "examples/hashicorp-vault.yaml", backend: "hashivault", chart: true},
	{dir: "examples/cert-manager-monitoring.yaml", backend: "file", chart: true},
}

// readValues reads a values file of the chart ("" for none: the defaults).
func readValues(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, file))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// renderChart renders the chart with values as `helm template` does
// (values.schema.json applies, and every `fail`), and returns each object
// as YAML, in Helm's install order, and NOTES.txt.
func renderChart(values map[string]any) (docs [][]byte, notes string, err error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, "", err
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.ClientOnly, inst.DryRun, inst.Replace, inst.IncludeCRDs = true, true, true, true
	inst.ReleaseName, inst.Namespace, inst.KubeVersion = releaseName, namespace, kubeVersion
	rel, err := inst.Run(ch, values)
	if err != nil {
		return nil, "", err
	}
	split := releaseutil.SplitManifests(rel.Manifest)
	keys := make([]string, 0, len(split))
	for k := range split {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	for _, k := range keys {
		if doc := strings.TrimSpace(split[k]); doc != "" {
			docs = append(docs, []byte(doc+"\n"))
		}
	}
	return docs, rel.Info.Notes, nil
}

// chartCRDs are the chart's objects of kinds outside k8s.io/api, each
// decoded strictly into the fields the chart uses.
type chartCRDs struct {
	certificates    []certificate
	serviceMonitors []serviceMonitor
	prometheusRules []prometheusRule
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1) the chart renders.
type serviceMonitor struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Metadata   crdMeta `json:"metadata"`
	Spec       struct {
		JobLabel          string               `json:"jobLabel"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Scheme        string `json:"scheme"`
			Interval      string `json:"interval"`
			Authorization struct {
				Type        string       `json:"type"`
				Credentials secretKeyRef `json:"credentials"`
			} `json:"authorization"`
			TLSConfig struct {
				ServerName         string `json:"serverName"`
				InsecureSkipVerify bool   `json:"insecureSkipVerify"`
				CA                 struct {
					Secret secretKeyRef `json:"secret"`
				} `json:"ca"`
			} `json:"tlsConfig"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type secretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// prometheusRule is the Prometheus Operator's PrometheusRule
// (monitoring.coreos.com/v1) with the fields of a Prometheus rules file.
type prometheusRule struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Metadata   crdMeta `json:"metadata"`
	Spec       struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

type ruleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []struct {
		Alert         string            `json:"alert,omitempty"`
		Record        string            `json:"record,omitempty"`
		Expr          string            `json:"expr"`
		For           string            `json:"for,omitempty"`
		KeepFiringFor string            `json:"keep_firing_for,omitempty"`
		Labels        map[string]string `json:"labels,omitempty"`
		Annotations   map[string]string `json:"annotations,omitempty"`
	} `json:"rules"`
}

// decodeCRD takes the documents of the kinds in chartCRDs, decoded
// strictly; it leaves the others to the k8s.io/api decoder.
func decodeCRD(m *manifests, doc []byte) (bool, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return false, err
	}
	var err error
	switch tm.APIVersion + " " + tm.Kind {
	case "cert-manager.io/v1 Certificate":
		var c certificate
		c, err = decodeLocal[certificate](doc)
		m.crds.certificates = append(m.crds.certificates, c)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		var s serviceMonitor
		s, err = decodeLocal[serviceMonitor](doc)
		m.crds.serviceMonitors = append(m.crds.serviceMonitors, s)
	case "monitoring.coreos.com/v1 PrometheusRule":
		var r prometheusRule
		r, err = decodeLocal[prometheusRule](doc)
		m.crds.prometheusRules = append(m.crds.prometheusRules, r)
	default:
		return false, nil
	}
	return true, err
}

// renderAndDecode renders the chart with an example's values and decodes
// every object strictly, failing t on any error.
func renderAndDecode(t *testing.T, valuesFile string) (*manifests, string) {
	t.Helper()
	docs, notes, err := renderChart(readValues(t, valuesFile))
	if err != nil {
		t.Fatalf("helm template with %s: %v", valuesFile, err)
	}
	m, err := decodeKinds(valuesFile, docs, chartKinds, decodeCRD)
	if err != nil {
		t.Fatalf("helm template with %s: an object does not decode strictly into its type:\n%v", valuesFile, err)
	}
	return m, notes
}

// appVersion is Chart.yaml's appVersion.
func appVersion(t *testing.T) string {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.AppVersion == "" {
		t.Fatal("Chart.yaml: no appVersion")
	}
	return ch.Metadata.AppVersion
}

// renderWorkload is renderAndDecode and the cardsignd workload it holds.
func renderWorkload(t *testing.T, valuesFile string) (*manifests, *workload, string) {
	t.Helper()
	m, notes := renderAndDecode(t, valuesFile)
	w, err := m.workload()
	if err != nil {
		t.Fatal(err)
	}
	return m, w, notes
}

// lintChart is `helm lint` with the values of file: any warning or error
// fails (information, such as a missing icon, does not).
func lintChart(t *testing.T, file string) {
	t.Helper()
	l := lint.AllWithKubeVersion(chartDir, readValues(t, file), namespace, kubeVersion)
	for _, msg := range l.Messages {
		if msg.Severity >= support.WarningSev {
			t.Errorf("helm lint (values %q): %s", file, msg)
		}
	}
}

// TestChartLint: `helm lint` passes with the defaults and with every
// example's values.
func TestChartLint(t *testing.T) {
	lintChart(t, "")
	for _, k := range chartExamples {
		lintChart(t, k.dir)
	}
}

// TestChart renders the chart with every example's values and runs the
// kustomize base's checks on what it makes, and the chart's own on the
// objects only it has.
func TestChart(t *testing.T) {
	// The defaults alone (no -f) render one replica on the embedded store.
	defaults := kustomization{dir: "", backend: "file", chart: true}
	for _, k := range append([]kustomization{defaults}, chartExamples...) {
		t.Run(cmpOr(k.dir, "defaults"), func(t *testing.T) {
			m, w, notes := renderWorkload(t, k.dir)
			p := m.problems(k, w)
			p = append(p, m.chartProblems(w)...)
			for _, s := range p {
				t.Errorf("%s: %s", k.dir, s)
			}
			if want := "ghcr.io/cardsign/cardsignd:" + appVersion(t); w.container.Image != want {
				t.Errorf("image %q, want %q: the tag defaults to the chart's appVersion", w.container.Image, want)
			}
			if !strings.Contains(notes, "cardsignd-grpc-headless.cardsign.svc:7700") {
				t.Errorf("NOTES.txt does not name the gRPC address:\n%s", notes)
			}
		})
	}
}

// TestChartExamplesAllChecked: every file in the chart's examples/ is in
// chartExamples, and the examples cover what the chart offers.
func TestChartExamplesAllChecked(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "examples", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(chartDir, f)
		if !slices.ContainsFunc(chartExamples, func(k kustomization) bool { return k.dir == rel }) {
			t.Errorf("%s is not in chartExamples: check every example", f)
		}
	}
	seen := map[string]bool{}
	for _, k := range chartExamples {
		m, w, _ := renderWorkload(t, k.dir)
		seen["backend "+w.cfg.backend] = true
		seen[fmt.Sprintf("postgres %v", w.cfg.storeURL != "")] = true
		seen[fmt.Sprintf("replicas>1 %v", replicas(w.deployment) > 1)] = true
		seen[fmt.Sprintf("certificate %v", len(m.crds.certificates) > 0)] = true
		seen[fmt.Sprintf("monitoring %v", len(m.crds.serviceMonitors) > 0 && len(m.crds.prometheusRules) > 0)] = true
		seen[fmt.Sprintf("ingress %v", len(m.ingresses) > 0)] = true
		seen[fmt.Sprintf("catalog %v", lookup(w.cfg.tree, "catalog.domain", "") != "")] = true
	}
	for _, want := range []string{"backend file", "backend gcpkms", "backend awskms", "postgres true", "postgres false",
		"replicas>1 true", "replicas>1 false", "certificate true", "certificate false", "monitoring true", "monitoring false",
		"ingress true", "ingress false", "catalog true", "catalog false"} {
		if !seen[want] {
			t.Errorf("no example renders %s", want)
		}
	}
}

// chartProblems checks what the chart has and the kustomize base does not:
// the store's claim, the Certificate, the ServiceMonitor, the
// PrometheusRule and the Ingress.
func (m *manifests) chartProblems(w *workload) []string {
	var p []string
	p = append(p, m.checkStoreVolume(w)...)
	p = append(p, m.checkChartCertificate(w)...)
	p = append(p, m.checkServiceMonitor(w)...)
	p = append(p, m.checkPrometheusRule()...)
	for _, ing := range m.ingresses {
		p = append(p, m.checkIngress(ing, w)...)
	}
	return p
}

// checkStoreVolume: the embedded store (no store.url) lives on a claim and
// the pod is replaced, never rolled (two pods would open one SQLite file, or
// wait for a ReadWriteOnce volume); on PostgreSQL nothing durable is local.
func (m *manifests) checkStoreVolume(w *workload) []string {
	var claim string
	for _, v := range w.spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	var p []string
	strategy := w.deployment.Spec.Strategy.Type
	if w.cfg.storeURL != "" {
		if claim != "" || len(m.pvcs) > 0 {
			p = append(p, "PostgreSQL store with a claim: nothing durable is kept in the pod")
		}
		if strategy != "RollingUpdate" {
			p = append(p, fmt.Sprintf("PostgreSQL store: strategy %s, want RollingUpdate", strategy))
		}
		return p
	}
	if strategy != "Recreate" {
		p = append(p, fmt.Sprintf("embedded store: strategy %q, want Recreate (the old pod lets go of the SQLite file and the volume first)", strategy))
	}
	if len(m.pvcs) != 1 || m.pvcs[0].Name != claim {
		return append(p, fmt.Sprintf("embedded store: the pod's claim %q is not the one claim the chart makes", claim))
	}
	if m.pvcs[0].Annotations["helm.sh/resource-policy"] != "keep" {
		p = append(p, "embedded store's claim: helm.sh/resource-policy: keep (an uninstall must not delete the keys and the audit log)")
	}
	return p
}

// tlsSecret is the Secret the pod's tls.* files come from.
func tlsSecret(w *workload) string {
	if f, ok := w.fs.files[lookup(w.cfg.tree, "tls.cert_file", "")]; ok && f.src.kind == "secret" {
		return f.src.name
	}
	return ""
}

// checkChartCertificate: the Certificate makes the Secret the pod mounts,
// in an encoding cardsignd reads, for every Service's name.
func (m *manifests) checkChartCertificate(w *workload) []string {
	var p []string
	for _, c := range m.crds.certificates {
		if c.Metadata.Namespace != namespace {
			p = append(p, fmt.Sprintf("Certificate %s: namespace %q", c.Metadata.Name, c.Metadata.Namespace))
		}
		if c.Spec.SecretName != tlsSecret(w) {
			p = append(p, fmt.Sprintf("Certificate: secretName %q, but tls.* are files of Secret %q", c.Spec.SecretName, tlsSecret(w)))
		}
		if c.Spec.IssuerRef.Name == "" || !slices.Contains([]string{"Issuer", "ClusterIssuer"}, c.Spec.IssuerRef.Kind) {
			p = append(p, fmt.Sprintf("Certificate: issuerRef %+v", c.Spec.IssuerRef))
		}
		if !slices.Contains([]string{"PKCS1", "PKCS8"}, c.Spec.PrivateKey.Encoding) || !slices.Contains(c.Spec.Usages, "server auth") {
			p = append(p, fmt.Sprintf("Certificate: privateKey.encoding %q, usages %q", c.Spec.PrivateKey.Encoding, c.Spec.Usages))
		}
		for _, s := range m.services {
			if name := fmt.Sprintf("%s.%s.svc", s.Name, s.Namespace); !slices.Contains(c.Spec.DNSNames, name) {
				p = append(p, fmt.Sprintf("Certificate: dnsNames lack %s", name))
			}
		}
	}
	if len(m.crds.certificates) > 1 {
		p = append(p, fmt.Sprintf("%d Certificates, want at most 1", len(m.crds.certificates)))
	}
	return p
}

// jwksService is the Service of the public documents.
func (m *manifests) jwksService() (name, portName string, labels map[string]string) {
	for _, s := range m.services {
		if s.Name == "cardsignd-jwks" {
			return s.Name, s.Spec.Ports[0].Name, s.Labels
		}
	}
	return "", "", nil
}

// checkServiceMonitor: Prometheus scrapes /metrics of the JWKS Service only
// (one target per replica, not three), on its port, in HTTPS with the
// certificate checked, with a bearer token (/metrics needs the auditor role).
func (m *manifests) checkServiceMonitor(w *workload) []string {
	var p []string
	jwks, portName, jwksLabels := m.jwksService()
	for _, sm := range m.crds.serviceMonitors {
		if sm.Metadata.Namespace != namespace || !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{namespace}) {
			p = append(p, "ServiceMonitor: in and over the release namespace")
		}
		for _, s := range m.services {
			if got := selects(&sm.Spec.Selector, s.Labels); got != (s.Name == jwks) {
				p = append(p, fmt.Sprintf("ServiceMonitor: selects Service %s: %v, want %v (only the JWKS Service)", s.Name, got, s.Name == jwks))
			}
		}
		if job := jwksLabels[sm.Spec.JobLabel]; job != "cardsignd" {
			p = append(p, fmt.Sprintf("ServiceMonitor: jobLabel %q gives job %q, want cardsignd (the job the alert rules name)", sm.Spec.JobLabel, job))
		}
		if len(sm.Spec.Endpoints) != 1 {
			p = append(p, fmt.Sprintf("ServiceMonitor: %d endpoints, want 1", len(sm.Spec.Endpoints)))
			continue
		}
		e := sm.Spec.Endpoints[0]
		if e.Port != portName || e.Path != "/metrics" || e.Scheme != map[bool]string{true: "https", false: "http"}[w.cfg.tls] {
			p = append(p, fmt.Sprintf("ServiceMonitor: endpoint %s %s %s, want port %s, /metrics, in the listener's scheme", e.Scheme, e.Port, e.Path, portName))
		}
		if e.Authorization.Type != "Bearer" || e.Authorization.Credentials.Name == "" || e.Authorization.Credentials.Key == "" {
			p = append(p, "ServiceMonitor: /metrics needs a bearer token of the auditor role (authorization.credentials)")
		}
		if e.TLSConfig.InsecureSkipVerify || e.TLSConfig.CA.Secret.Name != tlsSecret(w) || e.TLSConfig.ServerName != jwks+"."+namespace+".svc" {
			p = append(p, fmt.Sprintf("ServiceMonitor: tlsConfig %+v: verify the certificate with the CA of Secret %s for %s.%s.svc", e.TLSConfig, tlsSecret(w), jwks, namespace))
		}
	}
	if len(m.crds.serviceMonitors) > 0 && jwksLabels["app.kubernetes.io/component"] == "" {
		p = append(p, "JWKS Service: no app.kubernetes.io/component label for the ServiceMonitor to tell it from the gRPC Services")
	}
	return p
}

// alertRulesFile is the chart's copy of cardsignd's alert rules.
const alertRulesFile = chartDir + "/files/cardsignd-alerts.yaml"

// loadRuleGroups reads a Prometheus rules file strictly.
func loadRuleGroups(file string) ([]ruleGroup, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	f, err := decodeLocal[struct {
		Groups []ruleGroup `json:"groups"`
	}](b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return f.Groups, nil
}

// checkPrometheusRule: the rules are those of files/cardsignd-alerts.yaml,
// each an alert or a recording rule with an expression.
func (m *manifests) checkPrometheusRule() []string {
	var p []string
	for _, r := range m.crds.prometheusRules {
		want, err := loadRuleGroups(alertRulesFile)
		if err != nil {
			return append(p, err.Error())
		}
		if !reflect.DeepEqual(r.Spec.Groups, want) {
			got, _ := json.Marshal(r.Spec.Groups)
			w, _ := json.Marshal(want)
			p = append(p, fmt.Sprintf("PrometheusRule: groups differ from %s:\n got %s\nwant %s", alertRulesFile, got, w))
		}
		if len(r.Spec.Groups) == 0 {
			p = append(p, "PrometheusRule: no groups")
		}
		for _, g := range r.Spec.Groups {
			for _, rule := range g.Rules {
				if (rule.Alert == "") == (rule.Record == "") || strings.TrimSpace(rule.Expr) == "" {
					p = append(p, fmt.Sprintf("PrometheusRule: group %s: a rule needs alert or record, and an expr", g.Name))
				}
			}
		}
	}
	return p
}

// TestAlertRulesAreObservesCopy: the chart's rules file is the one in
// deploy/prometheus, byte for byte (promtool checks and unit-tests that one).
func TestAlertRulesAreObservesCopy(t *testing.T) {
	chart, err := os.ReadFile(alertRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := os.ReadFile("../prometheus/cardsignd-alerts.yaml")
	if err != nil {
		t.Fatalf("%v: the chart's %s is a copy of it", err, alertRulesFile)
	}
	if string(chart) != string(upstream) {
		t.Errorf("%s differs from deploy/prometheus/cardsignd-alerts.yaml: copy it (cp deploy/prometheus/cardsignd-alerts.yaml deploy/helm/cardsignd/files/)", alertRulesFile)
	}
}

// TestChartCheckConfig runs the real `cardsignd --check-config` on the
// cardsignd.yaml each example renders, with the pod's files laid out as
// kubelet would (checkConfig). On PostgreSQL the one problem must be the
// connection to the placeholder database (every other check passed); on the
// embedded store the config must pass.
func TestChartCheckConfig(t *testing.T) {
	bin := cardsigndBinary(t)
	for _, k := range chartExamples {
		t.Run(filepath.Base(k.dir), func(t *testing.T) {
			_, w, _ := renderWorkload(t, k.dir)
			res := checkConfig(t, bin, w)
			if w.cfg.storeURL != "" {
				if res.exit != 1 || len(res.problems) != 1 || !strings.Contains(res.problems[0], " store.url: cannot connect to ") || len(res.warnings) > 0 {
					t.Fatalf("cardsignd --check-config: want exit 1 and exactly one problem, the connection at store.url, and no warning; got exit %d:\n%s", res.exit, res.output)
				}
			} else if res.exit != 0 || len(res.problems) > 0 || len(res.warnings) > 0 {
				t.Fatalf("cardsignd --check-config: want exit 0, no problem and no warning; got exit %d:\n%s", res.exit, res.output)
			}
			t.Logf("cardsignd --check-config (as %s):\n%s", res.user, res.output)
		})
	}
}

// TestChartRefuses: values the chart must refuse, each with the message
// that names the value and the rule: a typo anywhere (values.schema.json),
// replicas that could not share a store or keys, fields the chart owns set
// in config, a password in the URL, a required value left out.
func TestChartRefuses(t *testing.T) {
	base := readValues(t, "examples/embedded-default.yaml")
	pg := readValues(t, "examples/aws-kms.yaml")
	for _, c := range []struct {
		name   string
		values map[string]any
		change string // YAML merged over values
		want   []string
	}{
		{"typo at the top", base, "replicaCont: 2", []string{"replicaCont", "additional properties"}},
		{"typo in a nested value", base, "postgres: {enabeld: true}", []string{"postgres", "enabeld"}},
		{"typo in a value's case", base, "ingress: {className: nginx, Host: keys.example.com}", []string{"ingress", "Host"}},
		{"wrong type", base, "replicaCount: three", []string{"replicaCount", "integer"}},
		{"bad enum", base, "podAntiAffinity: sometimes", []string{"podAntiAffinity"}},
		{"replicas without PostgreSQL", base, "replicaCount: 3", []string{"replicaCount: 3 replicas need PostgreSQL (postgres.enabled: true, postgres.url)"}},
		{"replicas with file keys", pg, "config: {keys: {backend: file}}", []string{"replicaCount: 3 replicas need keys every replica reaches"}},
		{"Vault's Kubernetes auth without its token", base, "config: {hashivault: {auth: {method: kubernetes, role: r}}}", []string{"needs vaultToken.enabled: true"}},
		{"Vault's token at another path", base, "vaultToken: {enabled: true}\nconfig: {hashivault: {auth: {method: kubernetes, role: r, jwt_file: /x}}}", []string{"config.hashivault.auth.jwt_file"}},
		{"grpc_addr in config", base, "config: {grpc_addr: 0.0.0.0:9000}", []string{"config.grpc_addr: set by the chart"}},
		{"tls file in config", base, "config: {tls: {key_file: /k.pem}}", []string{"config.tls.key_file: set by the chart"}},
		{"store.url in config", base, "config: {store: {url: 'postgres://x@db/x'}}", []string{"config.store.url: set by the chart from postgres.url"}},
		{"password in the URL", pg, "postgres: {url: 'postgres://cardsign:secret@db:5432/cardsign'}", []string{"postgres.url: carries a password"}},
		{"password as a query parameter", pg, "postgres: {url: 'postgres://cardsign@db:5432/cardsign?sslmode=verify-full&password=secret'}", []string{"postgres.url: carries a password"}},
		{"sslpassword as a query parameter", pg, "postgres: {url: 'postgres://cardsign@db:5432/cardsign?SSLPassword=secret'}", []string{"postgres.url: carries a password"}},
		{"not a PostgreSQL URL", pg, "postgres: {url: 'mysql://db/x'}", []string{"/postgres/url", "mysql://db/x"}},
		{"PostgreSQL without its Secret", pg, "postgres: {existingSecret: ''}", []string{"postgres.existingSecret: the Secret holding the PostgreSQL role's password"}},
		{"Ingress without a host", base, "ingress: {enabled: true}", []string{"ingress.host: the public host name"}},
		{"cert-manager without an issuer", base, "tls: {certManager: {enabled: true}}", []string{"tls.certManager.issuerRef.name"}},
		{"ServiceMonitor without a token", base, "metrics: {serviceMonitor: {enabled: true}}", []string{"metrics.serviceMonitor.bearerTokenSecret.name"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var change map[string]any
			if err := yaml.Unmarshal([]byte(c.change), &change); err != nil {
				t.Fatal(err)
			}
			vals := chartutil.CoalesceTables(change, deepCopyMap(t, c.values))
			_, _, err := renderChart(vals)
			if err == nil {
				t.Fatalf("the chart rendered with %s", c.change)
			}
			for _, s := range c.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("want %q in the error, got: %v", s, err)
				}
			}
		})
	}
}

func deepCopyMap(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestChartChecksFail: each of the chart's own checks finds what it is
// there to find, in a rendering broken in one place.
func TestChartChecksFail(t *testing.T) {
	for _, c := range []struct {
		name, values string
		mutate       func(m *manifests)
		want         string
	}{
		{"embedded store rolled", "examples/embedded-default.yaml", func(m *manifests) {
			m.deployments[0].Spec.Strategy.Type = "RollingUpdate"
		}, "want Recreate"},
		{"claim deleted at uninstall", "examples/embedded-default.yaml", func(m *manifests) {
			delete(m.pvcs[0].Annotations, "helm.sh/resource-policy")
		}, "helm.sh/resource-policy: keep"},
		{"claim with PostgreSQL", "examples/aws-kms.yaml", func(m *manifests) {
			m.pvcs = append(m.pvcs, nil)
		}, "PostgreSQL store with a claim"},
		{"Certificate for another Secret", "examples/cert-manager-monitoring.yaml", func(m *manifests) {
			m.crds.certificates[0].Spec.SecretName = "other"
		}, `secretName "other"`},
		{"Certificate without a Service's name", "examples/cert-manager-monitoring.yaml", func(m *manifests) {
			m.crds.certificates[0].Spec.DNSNames = m.crds.certificates[0].Spec.DNSNames[1:]
		}, "dnsNames lack cardsignd-grpc.cardsign.svc"},
		{"ServiceMonitor over every Service", "examples/cert-manager-monitoring.yaml", func(m *manifests) {
			delete(m.crds.serviceMonitors[0].Spec.Selector.MatchLabels, "app.kubernetes.io/component")
		}, "selects Service cardsignd-grpc: true"},
		{"ServiceMonitor without verifying", "examples/cert-manager-monitoring.yaml", func(m *manifests) {
			m.crds.serviceMonitors[0].Spec.Endpoints[0].TLSConfig.InsecureSkipVerify = true
		}, "verify the certificate"},
		{"ServiceMonitor without a token", "examples/cert-manager-monitoring.yaml", func(m *manifests) {
			m.crds.serviceMonitors[0].Spec.Endpoints[0].Authorization.Credentials.Name = ""
		}, "bearer token of the auditor role"},
		{"rules not the file's", "examples/cert-manager-monitoring.yaml", func(m *manifests) {
			m.crds.prometheusRules[0].Spec.Groups[0].Name = "other"
		}, "groups differ from"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, w, _ := renderWorkload(t, c.values)
			if p := m.chartProblems(w); len(p) > 0 {
				t.Fatalf("the unbroken rendering has problems: %q", p)
			}
			c.mutate(m)
			p := m.chartProblems(w)
			if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Errorf("want a problem containing %q, got %q", c.want, p)
			}
		})
	}
}
