package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
	"time"
)

// parseChain splits certPEM into its leaf and the certificates after it.
func parseChain(t *testing.T, certPEM []byte) (*x509.Certificate, []*x509.Certificate) {
	t.Helper()
	var certs []*x509.Certificate
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			t.Fatalf("PEM block %q in certPEM", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		t.Fatal("certPEM holds no certificate")
	}
	return certs[0], certs[1:]
}

func TestIssueVerifies(t *testing.T) {
	root := NewCA(t, "root")
	other := NewCA(t, "other")
	inter := root.Intermediate(t, "inter")
	inter2 := inter.Intermediate(t, "inter2")

	tests := []struct {
		name      string
		issuer    *CA
		trust     *CA
		leaf      Leaf
		usage     x509.ExtKeyUsage
		chainLen  int // certificates after the leaf in certPEM
		wantValid bool
	}{
		{"server from root", root, root, ServerLeaf(), x509.ExtKeyUsageServerAuth, 0, true},
		{"client from root", root, root, Leaf{CommonName: "c", URIs: []string{"spiffe://example.org/ci/team-a"}, Client: true}, x509.ExtKeyUsageClientAuth, 0, true},
		{"server via intermediate", inter, root, ServerLeaf(), x509.ExtKeyUsageServerAuth, 1, true},
		{"server via two intermediates", inter2, root, ServerLeaf(), x509.ExtKeyUsageServerAuth, 2, true},
		{"other CA", other, root, ServerLeaf(), x509.ExtKeyUsageServerAuth, 0, false},
		{"wrong usage", root, root, Leaf{CommonName: "c", Client: true}, x509.ExtKeyUsageServerAuth, 0, false},
		{"expired", root, root, Leaf{CommonName: "c", Server: true, NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}, x509.ExtKeyUsageServerAuth, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certPEM, keyPEM := tt.issuer.Issue(t, tt.leaf)
			leaf, chain := parseChain(t, certPEM)
			if len(chain) != tt.chainLen {
				t.Fatalf("certPEM has %d certificates after the leaf, want %d", len(chain), tt.chainLen)
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Fatalf("key does not pair with cert: %v", err)
			}
			roots := x509.NewCertPool()
			roots.AddCert(tt.trust.Cert)
			inters := x509.NewCertPool()
			for _, c := range chain {
				inters.AddCert(c)
			}
			_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inters, KeyUsages: []x509.ExtKeyUsage{tt.usage}})
			if (err == nil) != tt.wantValid {
				t.Fatalf("Verify error = %v, want valid=%v", err, tt.wantValid)
			}
		})
	}
}

func TestServerLeafNames(t *testing.T) {
	ca := NewCA(t, "root")
	certPEM, _ := ca.Issue(t, ServerLeaf())
	leaf, _ := parseChain(t, certPEM)
	for _, host := range []string{"localhost", "127.0.0.1", "::1"} {
		if err := leaf.VerifyHostname(host); err != nil {
			t.Errorf("VerifyHostname(%s): %v", host, err)
		}
	}
}

func TestSerialsDiffer(t *testing.T) {
	ca := NewCA(t, "root")
	a, _ := ca.Issue(t, ServerLeaf())
	b, _ := ca.Issue(t, ServerLeaf())
	la, _ := parseChain(t, a)
	lb, _ := parseChain(t, b)
	if la.SerialNumber.Cmp(lb.SerialNumber) == 0 {
		t.Fatal("two leaves share a serial number")
	}
	if la.SerialNumber.Sign() <= 0 || la.SerialNumber.BitLen() > 128 {
		t.Fatalf("serial %v is not a positive 128-bit number", la.SerialNumber)
	}
}

func TestWriteFilesModes(t *testing.T) {
	ca := NewCA(t, "root")
	certPEM, keyPEM := ca.Issue(t, ServerLeaf())
	dir := t.TempDir()
	certFile, keyFile := WriteFiles(t, dir, "server", certPEM, keyPEM)
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{certFile, 0o644}, {keyFile, 0o600}} {
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != f.mode {
			t.Errorf("%s mode = %v, want %v", f.path, got, f.mode)
		}
	}
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Fatalf("written files do not load: %v", err)
	}
}
