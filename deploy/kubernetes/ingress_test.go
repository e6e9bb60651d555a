package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
)

// The paths cardsignd serves to anyone (server/httpapi's NewMux): what an
// Ingress publishes. A path ending in "/" is a prefix.
var (
	documentPaths = []string{"/.well-known/jwks.json", "/.well-known/cardsign-revocations.json"}
	// The transparency log: its verifier keys, and its checkpoint and tiles.
	logPaths = []string{"/.well-known/cardsign-log-key", "/log/"}
	// With a catalog (catalog.domain): the AI Catalog, the DID document of
	// did:web:DOMAIN, and the registry's card URLs its entries point to.
	catalogPaths = []string{"/.well-known/ai-catalog.json", "/.well-known/did.json", "/agents/"}
	// Never published: metrics name callers, the probes are the cluster's.
	privatePaths = []string{"/metrics", "/healthz", "/readyz", "/readyz/documents"}
	// A request below each prefix that its handler answers.
	prefixSamples = map[string]string{"/log/": "/log/checkpoint", "/agents/": "/agents/example/agent-card.json"}
)

// publicPaths is what an Ingress in front of cfg publishes.
func publicPaths(cfg daemonConfig) []string {
	p := slices.Concat(documentPaths, logPaths)
	if lookup(cfg.tree, "catalog.domain", "") != "" {
		p = append(p, catalogPaths...)
	}
	slices.Sort(p)
	return p
}

// ingressPaths lists the Ingress's paths.
func ingressPaths(ing *networkingv1.Ingress) []networkingv1.HTTPIngressPath {
	var paths []networkingv1.HTTPIngressPath
	for _, r := range ing.Spec.Rules {
		if r.HTTP != nil {
			paths = append(paths, r.HTTP.Paths...)
		}
	}
	return paths
}

// checkIngress: the Ingress publishes exactly the public paths of the
// daemon behind it (a prefix as Prefix, a document as Exact, nothing
// private), from the JWKS Service's port, in HTTPS both ways.
func (m *manifests) checkIngress(ing *networkingv1.Ingress, w *workload) []string {
	var p []string
	if ing.Namespace != namespace {
		p = append(p, fmt.Sprintf("Ingress %s: namespace %q", ing.Name, ing.Namespace))
	}
	if w.cfg.tls && ing.Annotations["nginx.ingress.kubernetes.io/backend-protocol"] != "HTTPS" {
		p = append(p, "Ingress: the backend speaks HTTPS only: nginx.ingress.kubernetes.io/backend-protocol: HTTPS")
	}
	jwks, portName, _ := m.jwksService()
	for _, r := range ing.Spec.Rules {
		if !slices.ContainsFunc(ing.Spec.TLS, func(tls networkingv1.IngressTLS) bool { return slices.Contains(tls.Hosts, r.Host) }) {
			p = append(p, fmt.Sprintf("Ingress: host %q: no TLS", r.Host))
		}
	}
	var got []string
	for _, ip := range ingressPaths(ing) {
		got = append(got, ip.Path)
		want := networkingv1.PathTypeExact
		if strings.HasSuffix(ip.Path, "/") {
			want = networkingv1.PathTypePrefix
		}
		if ip.PathType == nil || *ip.PathType != want {
			p = append(p, fmt.Sprintf("Ingress: %s: pathType %s, so nothing else of the listener (/metrics) is published", ip.Path, want))
		}
		if s := ip.Backend.Service; s == nil || s.Name != jwks || s.Port.Name != portName {
			p = append(p, fmt.Sprintf("Ingress: %s: backend %+v, want Service %s port %s", ip.Path, ip.Backend, jwks, portName))
		}
		for _, private := range privatePaths {
			if private == ip.Path || (want == networkingv1.PathTypePrefix && strings.HasPrefix(private, ip.Path)) {
				p = append(p, fmt.Sprintf("Ingress: %s publishes %s", ip.Path, private))
			}
		}
	}
	slices.Sort(got)
	if want := publicPaths(w.cfg); !slices.Equal(got, want) {
		p = append(p, fmt.Sprintf("Ingress: paths %q, want %q", got, want))
	}
	return p
}

// TestIngressExample: examples/ingress.yaml decodes strictly into its
// k8s.io/api type and publishes the public paths of the base's daemon.
func TestIngressExample(t *testing.T) {
	b, err := os.ReadFile("examples/ingress.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj, gvk, err := strictDecoder.Decode(b, nil, nil)
	if err != nil {
		t.Fatalf("examples/ingress.yaml: %v", err)
	}
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok {
		t.Fatalf("examples/ingress.yaml is a %s, not an Ingress", gvk)
	}
	m, w := buildWorkload(t, "base")
	if !w.cfg.tls {
		t.Error("the base's config has no tls, but the Ingress talks HTTPS to it")
	}
	for _, p := range m.checkIngress(ing, w) {
		t.Errorf("examples/ingress.yaml: %s", p)
	}
}

// TestCheckIngressFails: checkIngress finds a missing log path, a private
// path published, a prefix published as Exact, and a wrong backend port.
func TestCheckIngressFails(t *testing.T) {
	m, w, _ := renderWorkload(t, "examples/postgres-replicas.yaml")
	if len(m.ingresses) != 1 {
		t.Fatalf("%d Ingresses, want 1", len(m.ingresses))
	}
	for _, c := range []struct {
		name   string
		mutate func(paths []networkingv1.HTTPIngressPath) []networkingv1.HTTPIngressPath
		want   string
	}{
		{"no /log/", func(ps []networkingv1.HTTPIngressPath) []networkingv1.HTTPIngressPath {
			return slices.DeleteFunc(ps, func(p networkingv1.HTTPIngressPath) bool { return p.Path == "/log/" })
		}, "want "},
		{"/ published", func(ps []networkingv1.HTTPIngressPath) []networkingv1.HTTPIngressPath {
			ps[0].Path, ps[0].PathType = "/", ptr(networkingv1.PathTypePrefix)
			return ps
		}, "/ publishes /metrics"},
		{"a prefix as Exact", func(ps []networkingv1.HTTPIngressPath) []networkingv1.HTTPIngressPath {
			for i := range ps {
				ps[i].PathType = ptr(networkingv1.PathTypeExact)
			}
			return ps
		}, "pathType Prefix"},
		{"the gRPC port", func(ps []networkingv1.HTTPIngressPath) []networkingv1.HTTPIngressPath {
			ps[0].Backend.Service.Port.Name = "grpc"
			return ps
		}, "want Service cardsignd-jwks port https"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ing := m.ingresses[0].DeepCopy()
			ing.Spec.Rules[0].HTTP.Paths = c.mutate(ing.Spec.Rules[0].HTTP.Paths)
			p := m.checkIngress(ing, w)
			if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Errorf("want a problem containing %q, got %q", c.want, p)
			}
		})
	}
}

// TestIngressPathsAreServed: every path an Ingress publishes (the kustomize
// example's and the chart's, catalog on) is a route of a real cardsignd,
// started here with the transparency log and a catalog: each answers from
// its handler, not with the router's own 404; and the private paths exist
// too, so a route that moved would show here rather than in production.
func TestIngressPathsAreServed(t *testing.T) {
	bin := cardsigndBinary(t)
	var paths []string
	b, err := os.ReadFile("examples/ingress.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := strictDecoder.Decode(b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ingressPaths(obj.(*networkingv1.Ingress)) {
		paths = append(paths, p.Path)
	}
	for _, k := range chartExamples {
		m, _ := renderAndDecode(t, k.dir)
		for _, ing := range m.ingresses {
			for _, p := range ingressPaths(ing) {
				paths = append(paths, p.Path)
			}
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	if !slices.Contains(paths, "/log/") || !slices.Contains(paths, "/.well-known/did.json") {
		t.Fatalf("the Ingresses publish %q: want the log's and the catalog's paths among them", paths)
	}
	base := startDaemon(t, bin)
	for _, p := range slices.Concat(paths, privatePaths) {
		req := p
		if strings.HasSuffix(p, "/") {
			s, ok := prefixSamples[p]
			if !ok {
				t.Errorf("%s: no sample request below this prefix in prefixSamples", p)
				continue
			}
			req = s
		}
		status, body := get(t, base+req)
		if status == http.StatusNotFound && body == "404 page not found\n" {
			t.Errorf("GET %s: cardsignd has no route for it (the router's 404)", req)
			continue
		}
		t.Logf("GET %s: %d", req, status)
	}
	// The check can fail: a path cardsignd does not serve gets the router's 404.
	if status, body := get(t, base+"/.well-known/no-such-document"); status != http.StatusNotFound || body != "404 page not found\n" {
		t.Errorf("GET of an unknown path: %d %q, want the router's 404", status, body)
	}
}

// startDaemon runs cardsignd on loopback (plain HTTP, allowed there) with
// the transparency log (on by default) and a catalog, until the test ends,
// and returns its HTTP listener's base URL once /healthz answers.
func startDaemon(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	httpAddr, grpcAddr := unusedLoopbackPort(t), unusedLoopbackPort(t)
	cfg := fmt.Sprintf("grpc_addr: %s\nhttp_addr: %s\ndata_dir: %s\ncatalog:\n  domain: example.com\n", grpcAddr, httpAddr, filepath.Join(dir, "data"))
	path := filepath.Join(dir, "cardsignd.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config", path)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	base := "http://" + httpAddr
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("cardsignd exited: %v\n%s", err, out.String())
		default:
		}
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cardsignd did not answer /healthz within 30s:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// get is the status and body of a GET.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
