package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
)

func TestParseAlg(t *testing.T) {
	tests := []struct {
		in      string
		want    Alg
		wantErr bool
	}{
		{"ES256", ES256, false},
		{"ES384", ES384, false},
		{"ES512", ES512, false},
		{"RS256", RS256, false},
		{"PS256", PS256, false},
		{"EdDSA", EdDSA, false},
		{"es256", "", true},
		{"EDDSA", "", true},
		{"HS256", "", true},
		{"none", "", true},
		{"", "", true},
		{" ES256", "", true},
	}
	for _, tt := range tests {
		got, err := ParseAlg(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseAlg(%q) = %q, %v; want %q, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil {
			if !errors.Is(err, ErrUnsupportedAlg) {
				t.Errorf("ParseAlg(%q) error %v does not wrap ErrUnsupportedAlg", tt.in, err)
			}
			for _, a := range Algs() {
				if !strings.Contains(err.Error(), string(a)) {
					t.Errorf("ParseAlg(%q) error %q does not list %s", tt.in, err, a)
				}
			}
		}
	}
}

func TestAlgHash(t *testing.T) {
	tests := []struct {
		alg  Alg
		want crypto.Hash
	}{
		{ES256, crypto.SHA256}, {ES384, crypto.SHA384}, {ES512, crypto.SHA512},
		{RS256, crypto.SHA256}, {PS256, crypto.SHA256}, {EdDSA, 0}, {"HS256", 0},
	}
	for _, tt := range tests {
		if got := tt.alg.Hash(); got != tt.want {
			t.Errorf("%s.Hash() = %v, want %v", tt.alg, got, tt.want)
		}
	}
}

func TestDefaultAlg(t *testing.T) {
	tests := []struct {
		name    string
		pub     crypto.PublicKey
		want    Alg
		wantErr bool
	}{
		{"P-256", keyFor(t, ES256).Public(), ES256, false},
		{"P-384", keyFor(t, ES384).Public(), ES384, false},
		{"P-521", keyFor(t, ES512).Public(), ES512, false},
		{"Ed25519", keyFor(t, EdDSA).Public(), EdDSA, false},
		{"RSA", rsa2048().Public(), RS256, false},
		{"P-224", mustEC(t, elliptic.P224()).Public(), "", true},
		{"private key", keyFor(t, ES256), "", true},
		{"nil", nil, "", true},
		{"nil EC", (*ecdsa.PublicKey)(nil), "", true},
	}
	for _, tt := range tests {
		got, err := DefaultAlg(tt.pub)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: DefaultAlg = %q, %v; want %q, err %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestCheckKey(t *testing.T) {
	p256 := keyFor(t, ES256).Public()
	ed := keyFor(t, EdDSA).Public()
	rsaPub := rsa2048().Public()
	tests := []struct {
		name     string
		alg      Alg
		pub      crypto.PublicKey
		mismatch bool // want *KeyMismatchError
		other    bool // want another error
	}{
		{"ES256 P-256", ES256, p256, false, false},
		{"ES384 P-384", ES384, keyFor(t, ES384).Public(), false, false},
		{"ES512 P-521", ES512, keyFor(t, ES512).Public(), false, false},
		{"RS256 RSA", RS256, rsaPub, false, false},
		{"PS256 RSA", PS256, rsaPub, false, false},
		{"EdDSA Ed25519", EdDSA, ed, false, false},
		{"ES384 P-256", ES384, p256, true, false},
		{"ES256 P-384", ES256, keyFor(t, ES384).Public(), true, false},
		{"ES256 RSA", ES256, rsaPub, true, false},
		{"RS256 EC", RS256, p256, true, false},
		{"EdDSA EC", EdDSA, p256, true, false},
		{"ES256 Ed25519", ES256, ed, true, false},
		{"RS256 RSA-1024", RS256, rsa1024().Public(), true, false},
		{"PS256 RSA-1024", PS256, rsa1024().Public(), true, false},
		{"RS256 even exponent", RS256, &rsa.PublicKey{N: rsa2048().N, E: 65536}, true, false},
		{"EdDSA short key", EdDSA, ed25519.PublicKey(make([]byte, 31)), true, false},
		{"ES256 nil", ES256, nil, true, false},
		{"unsupported alg", "HS256", p256, false, true},
	}
	for _, tt := range tests {
		err := CheckKey(tt.alg, tt.pub)
		var km *KeyMismatchError
		isMismatch := errors.As(err, &km)
		switch {
		case tt.mismatch && !isMismatch:
			t.Errorf("%s: CheckKey = %v, want *KeyMismatchError", tt.name, err)
		case tt.other && (err == nil || isMismatch):
			t.Errorf("%s: CheckKey = %v, want a non-mismatch error", tt.name, err)
		case !tt.mismatch && !tt.other && err != nil:
			t.Errorf("%s: CheckKey = %v, want nil", tt.name, err)
		}
		if isMismatch {
			if km.Alg != tt.alg || !strings.Contains(err.Error(), string(tt.alg)) || !strings.Contains(err.Error(), km.KeyType) {
				t.Errorf("%s: error %q should name alg %s and key type %q", tt.name, err, tt.alg, km.KeyType)
			}
		}
	}
}

func TestKeyType(t *testing.T) {
	tests := []struct {
		pub  crypto.PublicKey
		want string
	}{
		{keyFor(t, ES256).Public(), "EC P-256"},
		{keyFor(t, EdDSA).Public(), "Ed25519"},
		{rsa2048().Public(), "RSA 2048-bit"},
		{"x", "string"},
	}
	for _, tt := range tests {
		if got := KeyType(tt.pub); got != tt.want {
			t.Errorf("KeyType = %q, want %q", got, tt.want)
		}
	}
}
