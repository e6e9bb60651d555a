package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomization is a directory kustomize builds (or, with chart, an example
// values file the chart is rendered with), and the key backend its config
// must name.
type kustomization struct {
	dir     string
	backend string
	// chart: dir is a values file of the Helm chart, rendered into the
	// release namespace, which the chart does not make.
	chart bool
	// saAnnotation is the ServiceAccount annotation the cloud's workload
	// identity needs ("" for the base).
	saAnnotation string
}

var kustomizations = []kustomization{
	{dir: "base", backend: "file"},
	{dir: "overlays/gcp-kms", backend: "gcpkms", saAnnotation: "iam.gke.io/gcp-service-account"},
	{dir: "overlays/aws-kms", backend: "awskms", saAnnotation: "eks.amazonaws.com/role-arn"},
}

// namespace is where every object goes (base/kustomization.yaml).
const namespace = "cardsign"

// The kinds these manifests may hold, each decoded into its k8s.io/api
// type. Anything else fails: a CRD, a typo in a kind, or a Secret (a Secret
// in the base would overwrite the operator's real one on every apply).
var allowedKinds = map[schema.GroupVersionKind]bool{
	corev1.SchemeGroupVersion.WithKind("Namespace"):             true,
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"):        true,
	corev1.SchemeGroupVersion.WithKind("ConfigMap"):             true,
	corev1.SchemeGroupVersion.WithKind("Service"):               true,
	appsv1.SchemeGroupVersion.WithKind("Deployment"):            true,
	policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"): true,
	networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"):   true,
}

// chartKinds are the kinds the Helm chart may render besides its CRDs
// (decoded by decodeChart): no Namespace (Helm's release namespace is the
// operator's), a claim for the embedded store, an Ingress. Still no Secret.
var chartKinds = func() map[schema.GroupVersionKind]bool {
	k := maps.Clone(allowedKinds)
	delete(k, corev1.SchemeGroupVersion.WithKind("Namespace"))
	k[corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")] = true
	k[networkingv1.SchemeGroupVersion.WithKind("Ingress")] = true
	return k
}()

var strictDecoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(appsv1.AddToScheme(scheme))
	utilruntime.Must(policyv1.AddToScheme(scheme))
	utilruntime.Must(networkingv1.AddToScheme(scheme))
	// Strict: unknown fields and duplicate fields are errors (the field
	// names are compared case-sensitively, unlike encoding/json's).
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

// decodeStrict decodes one YAML document of a kustomize build into its
// k8s.io/api type.
func decodeStrict(doc []byte) (runtime.Object, error) {
	return decodeStrictKinds(doc, allowedKinds)
}

// decodeStrictKinds decodes one YAML document into its k8s.io/api type,
// one of the allowed kinds.
func decodeStrictKinds(doc []byte, allowed map[schema.GroupVersionKind]bool) (runtime.Object, error) {
	obj, gvk, err := strictDecoder.Decode(doc, nil, nil)
	if err != nil {
		return nil, err
	}
	if !allowed[*gvk] {
		return nil, fmt.Errorf("%s is not a kind these manifests may hold", gvk)
	}
	return obj, nil
}

// manifests is one kustomize build, decoded.
type manifests struct {
	dir             string
	namespaces      []*corev1.Namespace
	serviceAccounts map[string]*corev1.ServiceAccount
	configMaps      map[string]*corev1.ConfigMap
	services        []*corev1.Service
	deployments     []*appsv1.Deployment
	pdbs            []*policyv1.PodDisruptionBudget
	netpols         []*networkingv1.NetworkPolicy
	pvcs            []*corev1.PersistentVolumeClaim // the chart's embedded store
	ingresses       []*networkingv1.Ingress         // the chart's
	crds            chartCRDs                       // the chart's
}

// build runs kustomize (its Go module, as `kustomize build` does) on dir and
// returns each object as YAML.
func build(dir string) ([][]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	var docs [][]byte
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		docs = append(docs, y)
	}
	return docs, nil
}

// decodeAll decodes every document of a kustomize build strictly and sorts
// the objects by kind.
func decodeAll(dir string, docs [][]byte) (*manifests, error) {
	return decodeKinds(dir, docs, allowedKinds, nil)
}

// decodeKinds decodes every document strictly into one of the allowed kinds,
// or, when other is set and takes it, into a local type, and sorts the
// objects by kind.
func decodeKinds(dir string, docs [][]byte, allowed map[schema.GroupVersionKind]bool, other func(m *manifests, doc []byte) (bool, error)) (*manifests, error) {
	m := &manifests{dir: dir, serviceAccounts: map[string]*corev1.ServiceAccount{}, configMaps: map[string]*corev1.ConfigMap{}}
	var errs []string
	for _, doc := range docs {
		if other != nil {
			took, err := other(m, doc)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%v\n%s", err, doc))
			}
			if took {
				continue
			}
		}
		obj, err := decodeStrictKinds(doc, allowed)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%v\n%s", err, doc))
			continue
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			m.namespaces = append(m.namespaces, o)
		case *corev1.ServiceAccount:
			m.serviceAccounts[o.Name] = o
		case *corev1.ConfigMap:
			m.configMaps[o.Name] = o
		case *corev1.Service:
			m.services = append(m.services, o)
		case *appsv1.Deployment:
			m.deployments = append(m.deployments, o)
		case *policyv1.PodDisruptionBudget:
			m.pdbs = append(m.pdbs, o)
		case *networkingv1.NetworkPolicy:
			m.netpols = append(m.netpols, o)
		case *corev1.PersistentVolumeClaim:
			m.pvcs = append(m.pvcs, o)
		case *networkingv1.Ingress:
			m.ingresses = append(m.ingresses, o)
		default:
			errs = append(errs, fmt.Sprintf("%T has no place in these manifests", obj))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return m, nil
}

// buildAndDecode is build and decodeAll, failing t on any error.
func buildAndDecode(t *testing.T, dir string) *manifests {
	t.Helper()
	docs, err := build(dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	m, err := decodeAll(dir, docs)
	if err != nil {
		t.Fatalf("kustomize build %s: an object does not decode strictly into its k8s.io/api type:\n%v", dir, err)
	}
	return m
}

// buildWorkload is buildAndDecode and the cardsignd workload it holds.
func buildWorkload(t *testing.T, dir string) (*manifests, *workload) {
	t.Helper()
	m := buildAndDecode(t, dir)
	w, err := m.workload()
	if err != nil {
		t.Fatal(err)
	}
	return m, w
}

// TestManifests builds every kustomization and checks what it makes.
func TestManifests(t *testing.T) {
	for _, k := range kustomizations {
		t.Run(k.dir, func(t *testing.T) {
			m, w := buildWorkload(t, k.dir)
			for _, p := range m.problems(k, w) {
				t.Errorf("%s: %s", k.dir, p)
			}
		})
	}
}

// problems runs every check on a build of k.
func (m *manifests) problems(k kustomization, w *workload) []string {
	var p []string
	p = append(p, m.checkObjects(k)...)
	p = append(p, checkSecurity(w.spec, w.container)...)
	p = append(p, checkPorts(w.container, w.cfg)...)
	p = append(p, checkProbes(w.container, w.cfg)...)
	p = append(p, checkShutdown(w.spec, w.cfg)...)
	p = append(p, checkReplicas(w.deployment, w.cfg)...)
	p = append(p, checkResources(w.container)...)
	p = append(p, checkPassword(w.container, w.cfg)...)
	p = append(p, m.checkServices(w)...)
	p = append(p, m.checkDisruption(w)...)
	p = append(p, m.checkNetworkPolicy(w)...)
	p = append(p, w.fs.problems...)
	p = append(p, checkFiles(w)...)
	if w.cfg.backend != k.backend {
		p = append(p, fmt.Sprintf("keys.backend is %q, want %q", w.cfg.backend, k.backend))
	}
	// Keys every replica can reach: a KMS or an HSM, never file keys in a
	// pod's own emptyDir. The base is the exception, and says so: it is
	// not for applying (base/kustomization.yaml).
	shared := checkSharedKeys(w.deployment, w.cfg)
	if k.dir == "base" {
		if len(shared) == 0 {
			p = append(p, "the base was expected to keep file keys per pod (and to say it is not for applying); update this test and base/kustomization.yaml together")
		}
	} else {
		p = append(p, shared...)
	}
	return p
}

// TestCheckConfig runs the real `cardsignd --check-config` on the config of
// every kustomization, with the pod's files laid out as kubelet would lay
// them out. See checkConfig for what is and is not exercised.
func TestCheckConfig(t *testing.T) {
	bin := cardsigndBinary(t)
	for _, k := range kustomizations {
		t.Run(k.dir, func(t *testing.T) {
			_, d := buildWorkload(t, k.dir)
			res := checkConfig(t, bin, d)
			if res.exit != 1 || len(res.problems) != 1 || !strings.Contains(res.problems[0], " store.url: cannot connect to ") || len(res.warnings) > 0 {
				t.Fatalf("cardsignd --check-config: want exit 1 and exactly one problem, the connection at store.url (every other check passed), and no warning; got exit %d:\n%s", res.exit, res.output)
			}
			t.Logf("cardsignd --check-config (as %s):\n%s", res.user, res.output)
		})
	}
}

var (
	binDir      string
	buildOnce   sync.Once
	builtBinary string
	buildErr    error
)

func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "cardsignd-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// cardsigndBinary is CARDSIGND_BIN, or cardsignd built once from the
// repository root with the flags of the static KMS image (CGO_ENABLED=0,
// -tags nopkcs11).
func cardsigndBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("CARDSIGND_BIN"); p != "" {
			builtBinary = p
			return
		}
		builtBinary = filepath.Join(binDir, "cardsignd")
		cmd := exec.Command("go", "build", "-C", "../..", "-tags", "nopkcs11", "-o", builtBinary, "./cmd/cardsignd")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/cardsignd from the repository root (set CARDSIGND_BIN to use another binary): %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBinary
}

// TestStrictDecoding shows that the decoder the manifests pass refuses
// what it must: a misspelt field, at any depth, a duplicate field, a field
// in the wrong case, and kinds outside the list.
func TestStrictDecoding(t *testing.T) {
	good := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: x
spec:
  replicas: 1
  selector:
    matchLabels: {app: x}
  template:
    metadata:
      labels: {app: x}
    spec:
      containers:
        - name: x
          image: x
          readinessProbe:
            httpGet: {path: /readyz, port: 7701}
`
	if _, err := decodeStrict([]byte(good)); err != nil {
		t.Fatalf("a valid Deployment was refused: %v", err)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"misspelt top field", "  replicas: 1", "  replica: 1", `unknown field "spec.replica"`},
		{"misspelt nested field", "readinessProbe:", "readinesProbe:", `unknown field "spec.template.spec.containers[0].readinesProbe"`},
		{"field in the wrong case", "  replicas: 1", "  Replicas: 1", `unknown field "spec.Replicas"`},
		{"duplicate field", "  replicas: 1", "  replicas: 1\n  replicas: 2", `"replicas" already set`},
		{"wrong type", "  replicas: 1", "  replicas: three", "cannot unmarshal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := strings.Replace(good, c.from, c.to, 1)
			if doc == good {
				t.Fatalf("the case did not change the document")
			}
			_, err := decodeStrict([]byte(doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
		})
	}
	for _, doc := range []string{
		"apiVersion: v1\nkind: Secret\nmetadata: {name: cardsignd-db}\nstringData: {password: x}\n",
		"apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: cardsignd}\nspec: {secretName: cardsignd-tls}\n",
		"apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: x}\n",
	} {
		if _, err := decodeStrict([]byte(doc)); err == nil {
			t.Errorf("accepted a kind outside the list:\n%s", doc)
		}
	}
}

// TestBuildRefusesBadKustomization: a kustomization that names a file that
// is not there, or holds a misspelt field, does not build.
func TestBuildRefusesBadKustomization(t *testing.T) {
	for name, k := range map[string]string{
		"missing resource": "resources:\n  - ../base-that-is-not-there\n",
		"misspelt field":   "resource:\n  - deployment.yaml\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := build(dir); err == nil {
				t.Fatal("kustomize built it")
			}
		})
	}
}

// TestNothingElseInTheTree: every YAML file under base/ and overlays/ is
// used by its kustomization (a manifest left out of resources would never
// be checked, nor applied), and examples/ is in no kustomization.
func TestNothingElseInTheTree(t *testing.T) {
	for _, k := range kustomizations {
		kz, err := os.ReadFile(filepath.Join(k.dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		files, err := filepath.Glob(filepath.Join(k.dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			base := filepath.Base(f)
			if base == "kustomization.yaml" {
				continue
			}
			if !bytes.Contains(kz, []byte(" "+base+"\n")) && !bytes.Contains(kz, []byte(": "+base+"\n")) {
				t.Errorf("%s is not named in %s/kustomization.yaml", f, k.dir)
			}
		}
		if slices.ContainsFunc(strings.Split(string(kz), "\n"), func(l string) bool {
			return !strings.HasPrefix(strings.TrimSpace(l), "#") && strings.Contains(l, "examples")
		}) {
			t.Errorf("%s/kustomization.yaml uses examples/: those hold CRDs, kept out of the kustomizations", k.dir)
		}
	}
	examples, err := filepath.Glob("examples/*")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"examples/certificate.yaml", "examples/ingress.yaml"}; !slices.Equal(examples, want) {
		t.Errorf("examples/ holds %q; TestCertificateExample and TestIngressExample check %q: check every example", examples, want)
	}
	entries, err := os.ReadDir("overlays")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.ContainsFunc(kustomizations, func(k kustomization) bool { return k.dir == "overlays/"+e.Name() }) {
			t.Errorf("overlays/%s is not in this test's kustomizations: add it", e.Name())
		}
	}
}

// TestOverlaysKeepTheBaseConfig: an overlay's cardsignd.yaml replaces the
// base's whole file, so everything but the key backend (keys.backend,
// keys.on_revoke and the backend's own section) must stay as in the base:
// a change to the base's tokens, TLS or store must reach every overlay.
func TestOverlaysKeepTheBaseConfig(t *testing.T) {
	load := func(dir string) map[string]any {
		b, err := os.ReadFile(filepath.Join(dir, "cardsignd.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := parseConfig(string(b))
		if err != nil {
			t.Fatal(err)
		}
		// log: an overlay keeps the transparency log's key in its KMS too.
		for _, section := range []string{"gcpkms", "awskms", "pkcs11", "log"} {
			delete(c.tree, section)
		}
		if keys, ok := c.tree["keys"].(map[string]any); ok {
			delete(keys, "backend")
			delete(keys, "on_revoke")
		}
		return c.tree
	}
	base := load("base")
	for _, k := range kustomizations[1:] {
		if got := load(k.dir); !reflect.DeepEqual(got, base) {
			bb, _ := json.MarshalIndent(base, "", "  ")
			gb, _ := json.MarshalIndent(got, "", "  ")
			t.Errorf("%s/cardsignd.yaml differs from base/cardsignd.yaml beyond the key backend:\nbase: %s\n%s: %s", k.dir, bb, k.dir, gb)
		}
	}
}
