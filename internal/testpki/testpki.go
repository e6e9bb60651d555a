// Package testpki builds throwaway X.509 PKIs for tests: a root CA, optional
// intermediates, and server or client leaves, each with a fresh ECDSA P-256
// key. Every failure ends the calling test, so callers need no error checks.
//
// Nothing here is fit for production: keys live in memory and are written to
// disk unencrypted.
package testpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority that can issue leaves and intermediates.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte

	// chainPEM is what follows a leaf this CA issues in its certPEM: this CA's
	// own certificate and its parents' up to, but excluding, the root, which
	// verifiers must already trust and servers should not send.
	chainPEM []byte
}

// NewCA makes a self-signed root CA (ECDSA P-256) named name, valid from an
// hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := caTemplate(t, name)
	cert, certPEM := create(t, tmpl, tmpl, key.Public(), key)
	return &CA{Cert: cert, Key: key, CertPEM: certPEM}
}

// Leaf describes an end-entity certificate.
type Leaf struct {
	CommonName          string
	DNSNames            []string
	IPs                 []net.IP
	URIs                []string  // e.g. "spiffe://example.org/ci/team-a"; parse failure fails the test
	Server              bool      // ExtKeyUsageServerAuth
	Client              bool      // ExtKeyUsageClientAuth
	NotBefore, NotAfter time.Time // zero: an hour ago / a day from now
}

// ServerLeaf is a convenience: a server cert for localhost, 127.0.0.1 and ::1.
func ServerLeaf() Leaf {
	return Leaf{
		CommonName: "localhost",
		DNSNames:   []string{"localhost"},
		IPs:        []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		Server:     true,
	}
}

// Issue signs a leaf certificate (fresh P-256 key) and returns PEM cert and
// PEM PKCS#8 key. When ca is an intermediate, certPEM holds the leaf followed
// by the intermediates, as a server would send it.
func (ca *CA) Issue(t testing.TB, leaf Leaf) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: leaf.CommonName},
		DNSNames:     leaf.DNSNames,
		IPAddresses:  leaf.IPs,
		NotBefore:    leaf.NotBefore,
		NotAfter:     leaf.NotAfter,
		// ECDSA keys only sign; KeyEncipherment would be meaningless.
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = now.Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = now.Add(24 * time.Hour)
	}
	for _, s := range leaf.URIs {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("testpki: leaf URI %q: %v", s, err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	if leaf.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if leaf.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	_, leafPEM := create(t, tmpl, ca.Cert, key.Public(), ca.Key)
	certPEM = append(leafPEM, ca.chainPEM...)
	return certPEM, keyPEMOf(t, key)
}

// Intermediate returns a CA signed by ca (for chain tests). Leaves it issues
// carry the intermediate (and any above it below the root) in their certPEM.
func (ca *CA) Intermediate(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := caTemplate(t, name)
	cert, certPEM := create(t, tmpl, ca.Cert, key.Public(), ca.Key)
	chain := append(append([]byte(nil), certPEM...), ca.chainPEM...)
	return &CA{Cert: cert, Key: key, CertPEM: certPEM, chainPEM: chain}
}

// WriteFiles writes cert (0644) and key (0600) into dir as NAME.crt and
// NAME.key and returns their paths.
func WriteFiles(t testing.TB, dir, name string, certPEM, keyPEM []byte) (certFile, keyFile string) {
	t.Helper()
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		t.Fatalf("testpki: write cert: %v", err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatalf("testpki: write key: %v", err)
	}
	// WriteFile keeps the mode of a file that already exists; tests that
	// rewrite files still expect the documented modes.
	if err := os.Chmod(keyFile, 0o600); err != nil {
		t.Fatalf("testpki: chmod key: %v", err)
	}
	if err := os.Chmod(certFile, 0o644); err != nil {
		t.Fatalf("testpki: chmod cert: %v", err)
	}
	return certFile, keyFile
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testpki: generate key: %v", err)
	}
	return key
}

// serial returns a random positive 128-bit serial number, so certificates
// from separate CAs in one test never collide and tests can tell a rotated
// certificate from the one it replaced.
func serial(t testing.TB) *big.Int {
	t.Helper()
	maxSerial := new(big.Int).Lsh(big.NewInt(1), 128)
	maxSerial.Sub(maxSerial, big.NewInt(1))
	n, err := rand.Int(rand.Reader, maxSerial)
	if err != nil {
		t.Fatalf("testpki: serial: %v", err)
	}
	// Shift [0, 2^128-1) to [1, 2^128-1]: RFC 5280 wants positive serials.
	return n.Add(n, big.NewInt(1))
}

func create(t testing.TB, tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, []byte) {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatalf("testpki: create certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testpki: parse certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEMOf(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testpki: marshal key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// caTemplate is the certificate of a CA named name, valid from an hour ago
// for a day.
func caTemplate(t testing.TB, name string) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}
