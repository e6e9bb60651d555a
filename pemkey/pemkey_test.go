package pemkey

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	for label, der := range map[string][]byte{"PRIVATE KEY": pkcs8, "EC PRIVATE KEY": sec1} {
		s, err := Parse(label, der)
		if err != nil || !k.PublicKey.Equal(s.Public()) {
			t.Errorf("Parse(%q) = %v, %v; want the key", label, s, err)
		}
	}

	// The label is trusted: PKCS #8 bytes under the SEC 1 label are refused,
	// and FormatOf names the format they are in.
	var fe *FormatError
	if _, err := Parse("EC PRIVATE KEY", pkcs8); !errors.As(err, &fe) || fe.Label != "EC PRIVATE KEY" {
		t.Errorf("wrong label: err = %v, want a *FormatError", err)
	}
	if got := FormatOf(pkcs8, "EC PRIVATE KEY"); got != "PRIVATE KEY" {
		t.Errorf("FormatOf = %q, want PRIVATE KEY", got)
	}
	if got := FormatOf([]byte{1, 2, 3}, ""); got != "" {
		t.Errorf("FormatOf(junk) = %q, want \"\"", got)
	}

	for _, label := range []string{"ENCRYPTED PRIVATE KEY", "DSA PRIVATE KEY", "CERTIFICATE"} {
		if _, err := Parse(label, pkcs8); !errors.Is(err, ErrUnsupportedLabel) || Supported(label) {
			t.Errorf("Parse(%q): err = %v, want ErrUnsupportedLabel", label, err)
		}
	}

	x, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	xder, err := x509.MarshalPKCS8PrivateKey(x)
	if err != nil {
		t.Fatal(err)
	}
	var cs *CannotSignError
	if _, err := Parse("PRIVATE KEY", xder); !errors.As(err, &cs) {
		t.Errorf("X25519 key: err = %v, want a *CannotSignError", err)
	}
}
