package kubernetes

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// certificate is the part of cert-manager's Certificate (cert-manager.io/v1)
// that examples/certificate.yaml uses; any other field fails the decoding.
type certificate struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Metadata   crdMeta `json:"metadata"`
	Spec       struct {
		SecretName  string `json:"secretName"`
		Duration    string `json:"duration"`
		RenewBefore string `json:"renewBefore"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			Encoding       string `json:"encoding"`
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
		Usages    []string `json:"usages"`
		DNSNames  []string `json:"dnsNames"`
		IssuerRef struct {
			Name  string `json:"name"`
			Kind  string `json:"kind"`
			Group string `json:"group"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// crdMeta is the metadata a custom resource of these manifests may carry.
type crdMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// decodeLocal decodes a custom resource strictly into a local type: unknown
// or duplicate fields, and names in the wrong case, are errors.
func decodeLocal[T any](b []byte) (T, error) {
	var c T
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return c, err
	}
	strict, err := sigsjson.UnmarshalStrict(j, &c)
	if err == nil && len(strict) > 0 {
		err = errors.Join(strict...)
	}
	return c, err
}

// decodeCertificate is decodeLocal of a cert-manager Certificate.
func decodeCertificate(b []byte) (certificate, error) { return decodeLocal[certificate](b) }

// TestCertificateExample: the cert-manager Certificate decodes strictly
// into the fields this example uses, makes the Secret the Deployment mounts
// for tls.*, in a key encoding cardsignd reads, for the names of every
// Service.
func TestCertificateExample(t *testing.T) {
	b, err := os.ReadFile("examples/certificate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := decodeCertificate(b)
	if err != nil {
		t.Fatalf("examples/certificate.yaml: %v", err)
	}
	for _, bad := range []string{"secretname: x", "secretName: x\n  secretName: y", "secretNames: x"} {
		if _, err := decodeCertificate([]byte("apiVersion: cert-manager.io/v1\nkind: Certificate\nspec:\n  " + bad + "\n")); err == nil {
			t.Errorf("decoded a Certificate with %q", bad)
		}
	}
	if c.APIVersion != "cert-manager.io/v1" || c.Kind != "Certificate" || c.Metadata.Namespace != namespace {
		t.Errorf("apiVersion %q kind %q namespace %q: want cert-manager.io/v1 Certificate in %s", c.APIVersion, c.Kind, c.Metadata.Namespace, namespace)
	}
	if c.Spec.IssuerRef.Name == "" || !slices.Contains([]string{"Issuer", "ClusterIssuer"}, c.Spec.IssuerRef.Kind) {
		t.Errorf("issuerRef %+v", c.Spec.IssuerRef)
	}
	switch c.Spec.PrivateKey.Encoding {
	case "PKCS1", "PKCS8": // cardsignd reads PKCS #8, SEC 1 and PKCS #1 (pemkey)
	default:
		t.Errorf("privateKey.encoding %q", c.Spec.PrivateKey.Encoding)
	}
	if !slices.Contains(c.Spec.Usages, "server auth") {
		t.Errorf("usages %q: want server auth", c.Spec.Usages)
	}
	for _, k := range kustomizations {
		m, w := buildWorkload(t, k.dir)
		for _, field := range []string{"tls.cert_file", "tls.key_file"} {
			f, ok := w.fs.files[lookup(w.cfg.tree, field, "")]
			if !ok || f.src.kind != "secret" || f.src.name != c.Spec.SecretName {
				t.Errorf("%s: %s is not a file of Secret %s, the one the Certificate makes", k.dir, field, c.Spec.SecretName)
			}
		}
		for _, s := range m.services {
			name := fmt.Sprintf("%s.%s.svc", s.Name, s.Namespace)
			if !slices.Contains(c.Spec.DNSNames, name) {
				t.Errorf("%s: Service %s: dnsNames lack %s", k.dir, s.Name, name)
			}
		}
	}
}
