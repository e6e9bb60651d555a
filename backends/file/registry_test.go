package file_test

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

// These tests drive the registry through the real file backend, as the CLI
// and the daemon do.

func TestRegistryOpen(t *testing.T) {
	dir := t.TempDir()
	ec := testsupport.Key(t, jose.ES256)
	der, _ := x509.MarshalPKCS8PrivateKey(ec)
	pemPath := filepath.Join(dir, "ec.pem")
	if err := os.WriteFile(pemPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	jwkPath := filepath.Join(dir, "ec.jwk")
	jwk, _ := jose.MarshalPrivateJWK(ec, "from-file", jose.ES256)
	if err := os.WriteFile(jwkPath, jwk, 0o600); err != nil {
		t.Fatal(err)
	}
	rsaURI, err := mustLookupCreator(t).Create(t.Context(), backends.CreateRequest{Alg: jose.RS256, Name: filepath.Join(dir, "rsa.pem")})
	if err != nil {
		t.Fatal(err)
	}
	thumb, _ := jose.Thumbprint(ec.Public())

	tests := []struct {
		name     string
		uri      string
		opts     backends.OpenOptions
		wantAlg  jose.Alg
		wantKID  string
		mismatch bool // want *jose.KeyMismatchError
	}{
		{"PEM defaults", "file:" + pemPath, backends.OpenOptions{}, jose.ES256, thumb, false},
		{"file:// form", "file://" + pemPath, backends.OpenOptions{}, jose.ES256, thumb, false},
		{"JWK alg and kid", "file:" + jwkPath, backends.OpenOptions{}, jose.ES256, "from-file", false},
		{"kid override", "file:" + jwkPath, backends.OpenOptions{KID: "mine"}, jose.ES256, "mine", false},
		{"alg override same", "file:" + pemPath, backends.OpenOptions{Alg: jose.ES256}, jose.ES256, thumb, false},
		{"RSA defaults to RS256", rsaURI, backends.OpenOptions{}, jose.RS256, "", false},
		{"RSA PS256 override", rsaURI, backends.OpenOptions{Alg: jose.PS256}, jose.PS256, "", false},
		{"ES384 on P-256", "file:" + pemPath, backends.OpenOptions{Alg: jose.ES384}, "", "", true},
		{"EdDSA on P-256", "file:" + jwkPath, backends.OpenOptions{Alg: jose.EdDSA}, "", "", true},
		{"RS256 on P-256", "file:" + pemPath, backends.OpenOptions{Alg: jose.RS256}, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := newRegistry(t).Open(t.Context(), tt.uri, tt.opts)
			if tt.mismatch {
				var km *jose.KeyMismatchError
				if !errors.As(err, &km) {
					t.Fatalf("Open = %v, want *jose.KeyMismatchError", err)
				}
				if !strings.Contains(err.Error(), string(tt.opts.Alg)) || !strings.Contains(err.Error(), "P-256") {
					t.Errorf("error %q should name the alg and the key", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if k.Alg != tt.wantAlg {
				t.Errorf("Alg = %q, want %q", k.Alg, tt.wantAlg)
			}
			if tt.wantKID != "" && k.KID != tt.wantKID {
				t.Errorf("KID = %q, want %q", k.KID, tt.wantKID)
			}
			j, err := k.JWK()
			if err != nil {
				t.Fatal(err)
			}
			if j.Kid != k.KID || j.Alg != string(k.Alg) || j.Use != "sig" {
				t.Errorf("JWK = %+v", j)
			}
			sig, err := jose.Sign(t.Context(), k.Signer, k.Alg, []byte("e30.e30"))
			if err != nil {
				t.Fatal(err)
			}
			pub, _ := j.PublicKey()
			if err := jose.Verify(k.Alg, pub, []byte("e30.e30"), sig); err != nil {
				t.Errorf("Verify with the key's JWK: %v", err)
			}
		})
	}
}

func mustLookupCreator(t *testing.T) backends.Creator {
	t.Helper()
	b, err := newRegistry(t).Backend(t.Context(), "file")
	if err != nil {
		t.Fatal(err)
	}
	c, ok := b.(backends.Creator)
	if !ok {
		t.Fatal("file backend is not a Creator")
	}
	return c
}

func TestRegistryErrors(t *testing.T) {
	if s := newRegistry(t).Schemes(); !slices.Contains(s, "file") {
		t.Fatalf("Schemes() = %v, want file", s)
	}
	_, err := newRegistry(t).Open(t.Context(), "gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1", backends.OpenOptions{})
	var us *backends.UnknownSchemeError
	if !errors.As(err, &us) || us.Scheme != "gcpkms" || !strings.Contains(err.Error(), "file") {
		t.Errorf("unknown scheme: %v", err)
	}
	var ue *backends.URIError
	for _, uri := range []string{"", "/etc/key.pem", "1file:/x", "file:", "file://host/x"} {
		if _, err := newRegistry(t).Open(t.Context(), uri, backends.OpenOptions{}); !errors.As(err, &ue) {
			t.Errorf("Open(%q) = %v, want *backends.URIError", uri, err)
		}
	}
	// A bad key file reaches the caller with the URI and the file's problem.
	path := filepath.Join(t.TempDir(), "k")
	os.WriteFile(path, []byte("x"), 0o644)
	os.Chmod(path, 0o644)
	if _, err := newRegistry(t).Open(t.Context(), "file:"+path, backends.OpenOptions{}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("0644 key through the registry: %v", err)
	}
}

// newRegistry is what a program wires: the file backend by its constructor.
func newRegistry(t *testing.T) *backends.Registry {
	t.Helper()
	r := backends.NewRegistry()
	if err := r.Add(file.Scheme, file.Constructor, backends.Config{}); err != nil {
		t.Fatal(err)
	}
	return r
}
