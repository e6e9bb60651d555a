package kubernetes

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// daemonConfig is what these checks read from cardsignd.yaml, with
// cardsignd's defaults (README, configuration table) where a field is unset.
type daemonConfig struct {
	tree         map[string]any // the whole file, for path discovery and rewriting
	grpcAddr     string
	httpAddr     string
	shutdown     time.Duration
	backend      string
	tls          bool
	storeURL     string
	vaultAddr    string // hashivault.address
	passwordFile string
	dataDir      string // after the --data-dir argument
	keysDir      string // keys.dir, default <data_dir>/keys
}

func parseConfig(text string) (daemonConfig, error) {
	var tree map[string]any
	if err := yaml.Unmarshal([]byte(text), &tree); err != nil {
		return daemonConfig{}, fmt.Errorf("cardsignd.yaml: %w", err)
	}
	if tree == nil {
		tree = map[string]any{}
	}
	c := daemonConfig{
		tree:         tree,
		grpcAddr:     lookup(tree, "grpc_addr", "127.0.0.1:7700"),
		httpAddr:     lookup(tree, "http_addr", "127.0.0.1:7701"),
		backend:      lookup(tree, "keys.backend", "file"),
		tls:          lookup(tree, "tls.cert_file", "") != "",
		storeURL:     lookup(tree, "store.url", ""),
		vaultAddr:    lookup(tree, "hashivault.address", ""),
		passwordFile: lookup(tree, "store.password_file", ""),
		dataDir:      lookup(tree, "data_dir", "./cardsignd-data"),
	}
	d, err := time.ParseDuration(lookup(tree, "shutdown_timeout", "30s"))
	if err != nil {
		return c, fmt.Errorf("cardsignd.yaml: shutdown_timeout: %w", err)
	}
	c.shutdown = d
	return c, nil
}

// lookup is the string at a dotted path of tree, or def.
func lookup(tree map[string]any, path, def string) string {
	var v any = tree
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return def
		}
		if v, ok = m[k]; !ok {
			return def
		}
	}
	if s, ok := v.(string); ok {
		return s
	}
	return def
}

func port(addr string) (int32, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	return int32(n), err
}

// workload is the Deployment's pod and the config it runs with.
type workload struct {
	deployment *appsv1.Deployment
	spec       *corev1.PodSpec
	container  *corev1.Container
	configPath string
	cfg        daemonConfig
	fs         podFS
}

// workload finds the one Deployment, its cardsignd container, the config
// file its --config names (through the volume mounts to the ConfigMap that
// provides it) and the data directory of its --data-dir.
func (m *manifests) workload() (*workload, error) {
	if len(m.deployments) != 1 {
		return nil, fmt.Errorf("%d Deployments, want 1", len(m.deployments))
	}
	dep := m.deployments[0]
	spec := &dep.Spec.Template.Spec
	if len(spec.Containers) != 1 || spec.Containers[0].Name != "cardsignd" || len(spec.InitContainers) > 0 {
		return nil, fmt.Errorf("Deployment %s: want exactly one container, cardsignd, and no init container", dep.Name)
	}
	w := &workload{deployment: dep, spec: spec, container: &spec.Containers[0]}
	var dataDir string
	args := w.container.Args
	if len(w.container.Command) > 0 {
		return nil, fmt.Errorf("container cardsignd sets command %q: the image's entrypoint is cardsignd; pass flags in args", w.container.Command)
	}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(args[i], "=")
		if !hasValue {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("args: %s has no value", name)
			}
			i++
			value = args[i]
		}
		switch name {
		case "--config", "-config":
			w.configPath = value
		case "--data-dir", "-data-dir":
			dataDir = value
		default:
			// --grpc-addr, --http-addr and the others would override the
			// file; keep everything in the file, where the checks read it.
			return nil, fmt.Errorf("args: %s: only --config and --data-dir are expected (put the rest in cardsignd.yaml)", name)
		}
	}
	if w.configPath == "" {
		return nil, fmt.Errorf("args: no --config: cardsignd would run on its embedded default")
	}
	w.fs = newPodFS(spec, w.container, m.configMaps)
	f, ok := w.fs.files[w.configPath]
	if !ok || f.src.kind != "configMap" {
		return nil, fmt.Errorf("--config %s is not a file mounted from a ConfigMap in the build (%s)", w.configPath, strings.Join(w.fs.problems, "; "))
	}
	cfg, err := parseConfig(string(f.data))
	if err != nil {
		return nil, err
	}
	if dataDir != "" {
		cfg.dataDir = dataDir
	}
	cfg.keysDir = lookup(cfg.tree, "keys.dir", strings.TrimSuffix(cfg.dataDir, "/")+"/keys")
	w.cfg = cfg
	return w, nil
}

var (
	gcpServiceAccount = regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]@[a-z][-a-z0-9]{4,28}[a-z0-9]\.iam\.gserviceaccount\.com$`)
	awsRoleARN        = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$`)
	workloadIdentity  = map[string]*regexp.Regexp{
		"iam.gke.io/gcp-service-account": gcpServiceAccount,
		"eks.amazonaws.com/role-arn":     awsRoleARN,
	}
)

// objects is objs as metav1.Objects, for what every kind must have alike.
func objects[T metav1.Object](objs []T) []metav1.Object {
	out := make([]metav1.Object, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// checkObjects: the namespace, every object in it, the ServiceAccount and
// its workload identity, the image.
func (m *manifests) checkObjects(k kustomization) []string {
	var p []string
	switch {
	case k.chart:
		// Helm installs into the operator's namespace (NOTES.txt asks them
		// to enforce the restricted standard there).
		if len(m.namespaces) > 0 {
			p = append(p, "the chart makes a Namespace: Helm's release namespace is the operator's")
		}
	case len(m.namespaces) != 1 || m.namespaces[0].Name != namespace:
		p = append(p, fmt.Sprintf("want one Namespace, %s", namespace))
	case m.namespaces[0].Labels["pod-security.kubernetes.io/enforce"] != "restricted":
		p = append(p, "Namespace: the pod meets the restricted Pod Security Standard; enforce it (pod-security.kubernetes.io/enforce: restricted)")
	}
	metas := slices.Concat(
		objects(slices.Collect(maps.Values(m.serviceAccounts))), objects(slices.Collect(maps.Values(m.configMaps))),
		objects(m.services), objects(m.deployments), objects(m.pdbs), objects(m.netpols),
		objects(m.pvcs), objects(m.ingresses))
	for _, o := range metas {
		if o.GetNamespace() != namespace {
			p = append(p, fmt.Sprintf("%s is in namespace %q, not %s", o.GetName(), o.GetNamespace(), namespace))
		}
	}

	spec := m.deployments[0].Spec.Template.Spec
	sa, ok := m.serviceAccounts[spec.ServiceAccountName]
	if !ok {
		p = append(p, fmt.Sprintf("serviceAccountName %q: no such ServiceAccount in the build", spec.ServiceAccountName))
	} else {
		for name, re := range workloadIdentity {
			v, set := sa.Annotations[name]
			switch {
			case name == k.saAnnotation && !set:
				p = append(p, fmt.Sprintf("ServiceAccount %s: no %s annotation: cardsignd would have no %s credentials", sa.Name, name, k.backend))
			case name == k.saAnnotation && !re.MatchString(v):
				p = append(p, fmt.Sprintf("ServiceAccount %s: %s=%q is not of the form %s", sa.Name, name, v, re))
			case name != k.saAnnotation && set:
				p = append(p, fmt.Sprintf("ServiceAccount %s: %s is set, but keys.backend is %s", sa.Name, name, k.backend))
			}
		}
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			p = append(p, "ServiceAccount: cardsignd never calls the Kubernetes API: automountServiceAccountToken: false")
		}
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		p = append(p, "pod: automountServiceAccountToken: false (cardsignd never calls the Kubernetes API)")
	}
	image := m.deployments[0].Spec.Template.Spec.Containers[0].Image
	if !strings.HasPrefix(image, "ghcr.io/cardsign/cardsignd:") && !strings.HasPrefix(image, "ghcr.io/cardsign/cardsignd@sha256:") {
		p = append(p, fmt.Sprintf("image %q is not ghcr.io/cardsign/cardsignd with a tag or digest", image))
	}
	return p
}

// effective is the container's security setting, else the pod's.
func effective[T any](c *T, p *T) *T {
	if c != nil {
		return c
	}
	return p
}

// checkSecurity: non-root (UID 65532 of the distroless image), read-only
// root filesystem, no privilege escalation, every capability dropped,
// the runtime's seccomp profile, nothing of the host's.
func checkSecurity(spec *corev1.PodSpec, c *corev1.Container) []string {
	var p []string
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if v := effective(sc.RunAsNonRoot, psc.RunAsNonRoot); v == nil || !*v {
		p = append(p, "securityContext: runAsNonRoot: true")
	}
	if v := effective(sc.RunAsUser, psc.RunAsUser); v == nil || *v != 65532 {
		p = append(p, "securityContext: runAsUser: 65532 (the image's non-root user)")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		p = append(p, "securityContext: readOnlyRootFilesystem: true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		p = append(p, "securityContext: allowPrivilegeEscalation: false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		p = append(p, "securityContext: privileged")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		p = append(p, "securityContext: capabilities: drop [ALL], add none")
	}
	if v := effective(sc.SeccompProfile, psc.SeccompProfile); v == nil || v.Type != corev1.SeccompProfileTypeRuntimeDefault {
		p = append(p, "securityContext: seccompProfile: RuntimeDefault")
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		p = append(p, "pod: no host network, PID or IPC namespace")
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			p = append(p, fmt.Sprintf("volume %s: hostPath", v.Name))
		}
	}
	return p
}

// containerPort resolves a probe's or a Service's port (a number or a
// name) to the container's port number.
func containerPort(c *corev1.Container, ref intstr.IntOrString) (int32, bool) {
	if ref.Type == intstr.Int {
		return ref.IntVal, ref.IntVal > 0
	}
	for _, cp := range c.Ports {
		if cp.Name == ref.StrVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// checkPorts: the container declares the ports of grpc_addr and http_addr,
// and no other.
func checkPorts(c *corev1.Container, cfg daemonConfig) []string {
	var p []string
	var want []int32
	for _, a := range []struct{ field, addr string }{{"grpc_addr", cfg.grpcAddr}, {"http_addr", cfg.httpAddr}} {
		n, err := port(a.addr)
		if err != nil {
			p = append(p, fmt.Sprintf("%s %q: %v", a.field, a.addr, err))
			continue
		}
		want = append(want, n)
		if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.ContainerPort == n }) {
			p = append(p, fmt.Sprintf("container: no port %d (%s)", n, a.field))
		}
	}
	for _, cp := range c.Ports {
		if !slices.Contains(want, cp.ContainerPort) {
			p = append(p, fmt.Sprintf("container port %s (%d): cardsignd does not listen there", cp.Name, cp.ContainerPort))
		}
	}
	return p
}

// The paths cardsignd's HTTP listener serves for probes (server/http.go).
const (
	healthzPath   = "/healthz"          // the process is up
	readyzPath    = "/readyz"           // the last readiness check passed: it can sign
	documentsPath = "/readyz/documents" // it serves the JWKS and the revocation document
)

// checkProbes: the startup probe asks /readyz (a new replica proves once it
// can sign), the readiness probe /readyz/documents (a database outage that
// stops signing must not take the JWKS service's endpoints away), liveness
// /healthz,
// all on the port of http_addr, in HTTPS exactly when tls is on.
func checkProbes(c *corev1.Container, cfg daemonConfig) []string {
	var p []string
	httpPort, err := port(cfg.httpAddr)
	if err != nil {
		return []string{fmt.Sprintf("http_addr %q: %v", cfg.httpAddr, err)}
	}
	scheme := corev1.URISchemeHTTP
	if cfg.tls {
		scheme = corev1.URISchemeHTTPS
	}
	for _, pr := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"startupProbe", c.StartupProbe, readyzPath}, {"readinessProbe", c.ReadinessProbe, documentsPath}, {"livenessProbe", c.LivenessProbe, healthzPath}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			p = append(p, fmt.Sprintf("%s: want an httpGet probe of %s", pr.name, pr.path))
			continue
		}
		g := pr.probe.HTTPGet
		if g.Path != pr.path {
			p = append(p, fmt.Sprintf("%s: path %q, want %s", pr.name, g.Path, pr.path))
		}
		if n, ok := containerPort(c, g.Port); !ok || n != httpPort {
			p = append(p, fmt.Sprintf("%s: port %s is not %d, the port of http_addr %s", pr.name, g.Port.String(), httpPort, cfg.httpAddr))
		}
		if s := cmpOr(g.Scheme, corev1.URISchemeHTTP); s != scheme {
			p = append(p, fmt.Sprintf("%s: scheme %s, but cardsignd's HTTP listener speaks %s (tls.cert_file %s)", pr.name, s, scheme, map[bool]string{true: "set", false: "unset"}[cfg.tls]))
		}
		if g.Host != "" {
			p = append(p, fmt.Sprintf("%s: host %q: probe the pod's own address", pr.name, g.Host))
		}
	}
	return p
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// checkShutdown: kubelet waits longer than cardsignd's shutdown_timeout
// (plus the preStop pause) before it kills: SIGTERM lets in-flight
// signatures and their audit records finish.
func checkShutdown(spec *corev1.PodSpec, cfg daemonConfig) []string {
	grace := 30 * time.Second // Kubernetes' default
	if spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	need := cfg.shutdown
	if l := spec.Containers[0].Lifecycle; l != nil && l.PreStop != nil {
		switch {
		case l.PreStop.Sleep != nil:
			need += time.Duration(l.PreStop.Sleep.Seconds) * time.Second
		case l.PreStop.Exec != nil:
			return []string{"preStop exec: the distroless image has no shell or sleep"}
		}
	}
	if grace <= need {
		return []string{fmt.Sprintf("terminationGracePeriodSeconds %s is not more than shutdown_timeout plus the preStop pause (%s)", grace, need)}
	}
	return nil
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// checkReplicas: several replicas only on a PostgreSQL store (SQLite in a
// pod's emptyDir would give each replica its own keys and audit log), and
// spread over nodes.
func checkReplicas(d *appsv1.Deployment, cfg daemonConfig) []string {
	n := replicas(d)
	if n <= 1 {
		return nil
	}
	var p []string
	if !strings.HasPrefix(cfg.storeURL, "postgres://") && !strings.HasPrefix(cfg.storeURL, "postgresql://") {
		p = append(p, fmt.Sprintf("replicas: %d, but store.url is not a PostgreSQL URL: each replica would keep its own SQLite database (keys, audit log) in its emptyDir", n))
	}
	podLabels := labels.Set(d.Spec.Template.Labels)
	spreads := func(term corev1.PodAffinityTerm) bool {
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		return err == nil && term.TopologyKey == "kubernetes.io/hostname" && !sel.Empty() && sel.Matches(podLabels)
	}
	var required, preferred bool
	if a := d.Spec.Template.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		required = slices.ContainsFunc(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, spreads)
		preferred = slices.ContainsFunc(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			func(w corev1.WeightedPodAffinityTerm) bool { return spreads(w.PodAffinityTerm) })
	}
	if !required && !preferred {
		p = append(p, fmt.Sprintf("replicas: %d without pod anti-affinity on kubernetes.io/hostname selecting the pod's own labels: they may share a node", n))
	}
	if required {
		ru := d.Spec.Strategy.RollingUpdate
		if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType && (ru == nil || ru.MaxSurge == nil || ru.MaxSurge.String() != "0") {
			p = append(p, "required anti-affinity with a surging rollout: on a cluster with as many nodes as replicas the extra pod never schedules; set maxSurge: 0")
		}
	}
	return p
}

// checkSharedKeys: several replicas need keys that every replica reaches
// (a KMS, a network HSM). File keys would sit in each pod's emptyDir: the
// first replica makes the first key, the others can never open it, and
// the key dies with its pod.
func checkSharedKeys(d *appsv1.Deployment, cfg daemonConfig) []string {
	if n := replicas(d); n > 1 && cfg.backend == "file" {
		return []string{fmt.Sprintf("replicas: %d with keys.backend file: the keys (in %s) would live in one pod's emptyDir, out of the other replicas' reach", n, cfg.keysDir)}
	}
	return nil
}

// checkResources: requests and limits for CPU and memory, requests within
// limits.
func checkResources(c *corev1.Container) []string {
	var p []string
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := c.Resources.Requests[r]
		lim, hasLim := c.Resources.Limits[r]
		if !hasReq || !hasLim {
			p = append(p, fmt.Sprintf("resources: %s needs a request and a limit", r))
			continue
		}
		if req.Cmp(lim) > 0 {
			p = append(p, fmt.Sprintf("resources: %s request %s is above its limit %s", r, req.String(), lim.String()))
		}
	}
	return p
}

// checkPassword: the database password is not in the ConfigMap, and the
// container has one: store.password_file, or PGPASSWORD from a Secret.
func checkPassword(c *corev1.Container, cfg daemonConfig) []string {
	if cfg.storeURL == "" {
		return nil
	}
	u, err := url.Parse(cfg.storeURL)
	if err != nil {
		return []string{fmt.Sprintf("store.url: %v", err)}
	}
	if _, has := u.User.Password(); has || u.Query().Has("password") {
		return []string{"store.url carries a password: it would sit in a ConfigMap"}
	}
	if cfg.passwordFile != "" {
		return nil
	}
	for _, e := range c.Env {
		switch e.Name {
		case "PGPASSWORD":
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				return []string{"PGPASSWORD: take it from a Secret (valueFrom.secretKeyRef), not a literal value"}
			}
			return nil
		case "PGPASSFILE":
			return nil
		}
	}
	return []string{"store.url has no password, and neither store.password_file nor PGPASSWORD (from a Secret) gives one"}
}

// selects reports whether sel selects the pod's labels (an empty selector
// does not count: it would select every pod in the namespace).
func selects(sel *metav1.LabelSelector, pod map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(pod))
}

// checkServices: the gRPC Service, its headless twin and the JWKS Service
// select the pod and reach the ports cardsignd listens on.
func (m *manifests) checkServices(w *workload) []string {
	var p []string
	grpcPort, _ := port(w.cfg.grpcAddr)
	httpPort, _ := port(w.cfg.httpAddr)
	want := map[string]int32{"cardsignd-grpc": grpcPort, "cardsignd-grpc-headless": grpcPort, "cardsignd-jwks": httpPort}
	podLabels := w.deployment.Spec.Template.Labels
	for _, s := range m.services {
		target, known := want[s.Name]
		if !known {
			p = append(p, fmt.Sprintf("Service %s: not one this test knows (cardsignd-grpc, cardsignd-grpc-headless, cardsignd-jwks)", s.Name))
			continue
		}
		delete(want, s.Name)
		if !selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}, podLabels) {
			p = append(p, fmt.Sprintf("Service %s: selector %v does not select the pod (labels %v)", s.Name, s.Spec.Selector, podLabels))
		}
		if headless := s.Spec.ClusterIP == corev1.ClusterIPNone; headless != strings.HasSuffix(s.Name, "-headless") {
			p = append(p, fmt.Sprintf("Service %s: clusterIP %q", s.Name, s.Spec.ClusterIP))
		}
		if s.Spec.PublishNotReadyAddresses {
			p = append(p, fmt.Sprintf("Service %s: publishNotReadyAddresses would send calls to replicas that cannot sign", s.Name))
		}
		if len(s.Spec.Ports) != 1 {
			p = append(p, fmt.Sprintf("Service %s: %d ports, want 1", s.Name, len(s.Spec.Ports)))
			continue
		}
		sp := s.Spec.Ports[0]
		tp := sp.TargetPort
		if tp.Type == intstr.Int && tp.IntVal == 0 {
			tp = intstr.FromInt32(sp.Port)
		}
		if n, ok := containerPort(w.container, tp); !ok || n != target {
			p = append(p, fmt.Sprintf("Service %s: targetPort %s is not cardsignd's port %d", s.Name, tp.String(), target))
		}
	}
	for name := range want {
		p = append(p, fmt.Sprintf("no Service %s", name))
	}
	return p
}

// checkDisruption: one PodDisruptionBudget over the pod that lets a drain
// proceed one replica at a time; none over a single replica, where a budget
// either blocks every drain or allows everything.
func (m *manifests) checkDisruption(w *workload) []string {
	n := replicas(w.deployment)
	if n == 1 {
		if len(m.pdbs) > 0 {
			return []string{"PodDisruptionBudget over a single replica: it would block every drain, or allow all"}
		}
		return nil
	}
	if len(m.pdbs) != 1 {
		return []string{fmt.Sprintf("%d PodDisruptionBudgets, want 1", len(m.pdbs))}
	}
	pdb := m.pdbs[0]
	var p []string
	if !selects(pdb.Spec.Selector, w.deployment.Spec.Template.Labels) {
		p = append(p, "PodDisruptionBudget: its selector does not select the pod")
	}
	switch {
	case pdb.Spec.MaxUnavailable != nil && pdb.Spec.MinAvailable != nil:
		p = append(p, "PodDisruptionBudget: minAvailable and maxUnavailable are exclusive")
	case pdb.Spec.MaxUnavailable != nil:
		if pdb.Spec.MaxUnavailable.Type != intstr.Int || pdb.Spec.MaxUnavailable.IntVal < 1 || pdb.Spec.MaxUnavailable.IntVal >= n {
			p = append(p, fmt.Sprintf("PodDisruptionBudget: maxUnavailable %s: want a number from 1 to replicas-1 (%d)", pdb.Spec.MaxUnavailable.String(), n-1))
		}
	case pdb.Spec.MinAvailable != nil:
		if pdb.Spec.MinAvailable.Type != intstr.Int || pdb.Spec.MinAvailable.IntVal < 1 || pdb.Spec.MinAvailable.IntVal >= n {
			p = append(p, fmt.Sprintf("PodDisruptionBudget: minAvailable %s: want a number from 1 to replicas-1 (%d), or no drain can proceed", pdb.Spec.MinAvailable.String(), n-1))
		}
	default:
		p = append(p, "PodDisruptionBudget: neither minAvailable nor maxUnavailable")
	}
	return p
}

// allows reports whether one of the rules' port lists lets port/protocol
// through (a rule without ports allows every port; the peers are not
// looked at).
func allows(ports [][]networkingv1.NetworkPolicyPort, c *corev1.Container, n int32, proto corev1.Protocol) bool {
	for _, rule := range ports {
		if len(rule) == 0 {
			return true
		}
		for _, pp := range rule {
			if cmpOr(ptrVal(pp.Protocol), corev1.ProtocolTCP) != proto {
				continue
			}
			if pp.Port == nil {
				return true
			}
			if got, ok := containerPort(c, *pp.Port); ok && (got == n || (pp.EndPort != nil && got <= n && n <= *pp.EndPort)) {
				return true
			}
		}
	}
	return false
}

func ptrVal[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// checkNetworkPolicy: one policy over the pod, both directions; in: gRPC
// and HTTPS; out: DNS, the database's port, and 443 for a KMS.
func (m *manifests) checkNetworkPolicy(w *workload) []string {
	if len(m.netpols) != 1 {
		return []string{fmt.Sprintf("%d NetworkPolicies, want 1", len(m.netpols))}
	}
	np := m.netpols[0]
	var p []string
	if !selects(&np.Spec.PodSelector, w.deployment.Spec.Template.Labels) {
		p = append(p, "NetworkPolicy: podSelector does not select the pod")
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		p = append(p, "NetworkPolicy: policyTypes [Ingress, Egress]")
	}
	var in, out [][]networkingv1.NetworkPolicyPort
	for _, r := range np.Spec.Ingress {
		in = append(in, r.Ports)
	}
	for _, r := range np.Spec.Egress {
		out = append(out, r.Ports)
	}
	grpcPort, _ := port(w.cfg.grpcAddr)
	httpPort, _ := port(w.cfg.httpAddr)
	for _, want := range []int32{grpcPort, httpPort} {
		if !allows(in, w.container, want, corev1.ProtocolTCP) {
			p = append(p, fmt.Sprintf("NetworkPolicy: no ingress to port %d", want))
		}
	}
	type need struct {
		port  int32
		proto corev1.Protocol
		why   string
	}
	needs := []need{{53, corev1.ProtocolUDP, "DNS"}, {53, corev1.ProtocolTCP, "DNS"}}
	if w.cfg.storeURL != "" {
		dbPort := int32(5432)
		if u, err := url.Parse(w.cfg.storeURL); err == nil && u.Port() != "" {
			n, _ := strconv.ParseInt(u.Port(), 10, 32)
			dbPort = int32(n)
		}
		needs = append(needs, need{dbPort, corev1.ProtocolTCP, "PostgreSQL (store.url)"})
	}
	if w.cfg.backend == "gcpkms" || w.cfg.backend == "awskms" {
		needs = append(needs, need{443, corev1.ProtocolTCP, "the KMS (keys.backend " + w.cfg.backend + ")"})
	}
	if w.cfg.backend == "gcpkms" {
		needs = append(needs, need{80, corev1.ProtocolTCP, "the GKE metadata server (Workload Identity's credentials)"})
	}
	if u, err := url.Parse(w.cfg.vaultAddr); w.cfg.vaultAddr != "" && err == nil {
		port := int32(443)
		if n, err := strconv.ParseInt(u.Port(), 10, 32); err == nil {
			port = int32(n)
		}
		needs = append(needs, need{port, corev1.ProtocolTCP, "Vault (hashivault.address)"})
	}
	for _, n := range needs {
		if !allows(out, w.container, n.port, n.proto) {
			p = append(p, fmt.Sprintf("NetworkPolicy: no egress to %d/%s for %s", n.port, n.proto, n.why))
		}
	}
	return p
}
