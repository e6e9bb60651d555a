package signer

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

var cardOptionsStrip = card.Options{StripUnknown: true}

// The spec's sample card (§8.5) carries two v0.3 keys, so every benchmark
// signs it with --strip-unknown, as a user would.

func benchSign(b *testing.B, alg jose.Alg) {
	k := newKey(b, alg)
	k.Headers = &HeaderCache{} // as the daemon's keys: headers built once per key
	data := testsupport.Card(b, "spec-sample.json")
	opts := Options{Keys: []Key{k.Key}, Card: cardOptionsStrip}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sign(b.Context(), data, opts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignES256(b *testing.B) { benchSign(b, jose.ES256) }
func BenchmarkSignEdDSA(b *testing.B) { benchSign(b, jose.EdDSA) }

// BenchmarkBaselineCanonicalizeECDSA is the floor Sign is measured against:
// canonicalize, then one bare ecdsa.SignASN1 over the SHA-256 of the
// signing input, with no lint, header, local verification or output.
func BenchmarkBaselineCanonicalizeECDSA(b *testing.B) {
	priv := testsupport.Key(b, jose.ES256).(*ecdsa.PrivateKey)
	data := testsupport.Card(b, "spec-sample.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		l, err := card.Load(data, cardOptionsStrip)
		if err != nil {
			b.Fatal(err)
		}
		c, err := card.Canonical(l.Value, card.ProfileSpec)
		if err != nil {
			b.Fatal(err)
		}
		digest := sha256.Sum256(signingInput("eyJhbGciOiJFUzI1NiJ9", c))
		if _, err := ecdsa.SignASN1(rand.Reader, priv, digest[:]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyES256(b *testing.B) {
	k := newKey(b, jose.ES256)
	res, err := Sign(b.Context(), testsupport.Card(b, "spec-sample.json"), Options{Keys: []Key{k.Key}, Card: cardOptionsStrip})
	if err != nil {
		b.Fatal(err)
	}
	opts := VerifyOptions{Trusted: keySet(k)}
	b.SetBytes(int64(len(res.Card)))
	b.ReportAllocs()
	for b.Loop() {
		v, err := Verify(b.Context(), res.Card, opts)
		if err != nil || !v.Valid(true) {
			b.Fatal("does not verify", err)
		}
	}
}
