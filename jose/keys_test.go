package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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
	switch alg {
	case ES256:
		return mustEC(t, elliptic.P256())
	case ES384:
		return mustEC(t, elliptic.P384())
	case ES512:
		return mustEC(t, elliptic.P521())
	case RS256, PS256:
		return rsa2048()
	case EdDSA:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	t.Fatalf("no key for alg %q", alg)
	return nil
}
