package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
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
