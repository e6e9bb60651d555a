package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"sync"
	"testing"
)

// RSA key generation is slow; tests share one key per size.
var (
	rsa2048 = sync.OnceValue(func() *rsa.PrivateKey { return mustRSA(2048) })
	rsa1024 = sync.OnceValue(func() *rsa.PrivateKey { return mustRSA(1024) })
)

func mustRSA(bits int) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		panic(err)
	}
	return k
}

func mustEC(t testing.TB, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// keyFor returns a fresh (or shared, for RSA) private key fitting alg.
func keyFor(t testing.TB, alg Alg) crypto.Signer {
	t.Helper()
	if alg == RS256 || alg == PS256 {
		return rsa2048()
	}
	k, err := GenerateKey(alg, 2048)
	if err != nil {
		t.Fatalf("no key for alg %q: %v", alg, err)
	}
	return k
}

// TestGenerateKey: every supported alg gets a key CheckKey accepts for it
// (so ES384 gets P-384, not P-256), and anything else is refused.
func TestGenerateKey(t *testing.T) {
	for _, alg := range Algs() {
		k, err := GenerateKey(alg, 2048)
		if err != nil {
			t.Fatalf("GenerateKey(%s): %v", alg, err)
		}
		if err := CheckKey(alg, k.Public()); err != nil {
			t.Errorf("GenerateKey(%s) gave %s: %v", alg, KeyType(k.Public()), err)
		}
	}
	if _, err := GenerateKey("HS256", 2048); !errors.Is(err, ErrUnsupportedAlg) {
		t.Errorf("GenerateKey(HS256) = %v, want ErrUnsupportedAlg", err)
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
