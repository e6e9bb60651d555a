package testsupport

import (
	"crypto"
	"crypto/rsa"
	"sync"
	"testing"

	"github.com/cardsign/cardsign/jose"
)

// rsaKey is one 2048-bit RSA key per test binary: making one takes up to a
// second, and no test needs two RSA keys to differ. Once set it is never
// changed.
var rsaKey = sync.OnceValues(func() (crypto.Signer, error) {
	return jose.GenerateKey(jose.RS256, 2048)
})

// Key returns a private key for alg (a *ecdsa.PrivateKey, ed25519.PrivateKey
// or *rsa.PrivateKey), failing t if it cannot be made. EC and Ed25519 keys are
// new on every call; RS256 and PS256 share one 2048-bit RSA key.
func Key(t testing.TB, alg jose.Alg) crypto.Signer {
	t.Helper()
	var (
		k   crypto.Signer
		err error
	)
	switch alg {
	case jose.RS256, jose.PS256:
		k, err = rsaKey()
	default:
		k, err = jose.GenerateKey(alg, 0)
	}
	if err != nil {
		t.Fatalf("test key for %s: %v", alg, err)
	}
	return k
}

// RSAKey is Key(t, jose.RS256) as the *rsa.PrivateKey it is, for tests that
// encode the key in an RSA-specific form.
func RSAKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	return Key(t, jose.RS256).(*rsa.PrivateKey)
}
