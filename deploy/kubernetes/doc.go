// Package kubernetes holds no code: it is the module of cardsignd's
// Kubernetes manifests (base/, overlays/, examples/) and of the tests that
// check them and the Helm chart (../helm/cardsignd). It is a module of its
// own so that the Kubernetes, kustomize and Helm dependencies of those tests
// never enter the daemon's module graph.
//
// The tests (cd deploy/kubernetes && go test ./...) build every
// kustomization with the kustomize Go module and render the chart with each
// example values file through Helm's Go library, decode every object strictly
// into its k8s.io/api type, check the pod against the config it mounts
// (probes, ports, files, replicas and store, security context), and run the
// real cardsignd --check-config on that config with its files laid out as
// kubelet would. CARDSIGND_BIN names a cardsignd binary to use; without it
// the tests build one from the repository root.
package kubernetes
