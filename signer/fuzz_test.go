package signer

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/strictjson"
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

// FuzzVerify: Verify never panics on any card; unreadable cards are
// *strictjson.Error; and it never calls a signature valid over content nobody
// signed: the only key is the fuzzer's, which signed the seeds alone, so a
// valid signature's profile bytes must be those of a seed.
func FuzzVerify(f *testing.F) {
	key, set := fuzzKey(f)
	files, _ := filepath.Glob("../testdata/cards/*.json")
	signed := map[string]bool{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		res, err := Sign(context.Background(), data, Options{Keys: []Key{key}, Card: cardOptionsStrip})
		if err != nil {
			f.Fatalf("seed %s: %v", file, err)
		}
		f.Add(res.Card)
		l, err := card.Load(res.Card, card.Options{})
		if err != nil {
			f.Fatal(err)
		}
		forms, err := card.CanonicalForms(l.Value)
		if err != nil {
			f.Fatal(err)
		}
		signed[string(forms.Spec)], signed[string(forms.SDK)], signed[string(forms.Python)] = true, true, true
	}
	opts := VerifyOptions{Trusted: set, Limits: strictjson.Limits{MaxBytes: 1 << 16, MaxDepth: 32}}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Verify(context.Background(), data, opts)
		if err != nil {
			var ce *strictjson.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Verify error is %T, want *strictjson.Error: %v", err, err)
			}
			return
		}
		for _, c := range v.Checks {
			if !c.Valid {
				if c.Reason == "" {
					t.Fatal("invalid signature without a reason")
				}
				continue
			}
			l, err := card.Load(data, card.Options{Limits: opts.Limits})
			if err != nil {
				t.Fatal(err)
			}
			forms, err := card.CanonicalForms(l.Value)
			if err != nil {
				t.Fatal(err)
			}
			covered := map[card.Profile][]byte{card.ProfileSpec: forms.Spec, card.ProfileSDK: forms.SDK, card.ProfilePythonASCII: forms.Python}[c.Profile]
			if !signed[string(covered)] {
				t.Fatalf("signature %d valid (%s) over bytes no one signed: %q", c.Index, c.Profile, covered)
			}
		}
	})
}
