package signer

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
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

// BenchmarkCryptoES256 is the crypto floor of BenchmarkSignES256 and
// BenchmarkVerifyES256: the SHA-256 of the sample card's signing input,
// one ecdsa.SignASN1 and one ecdsa.VerifyASN1 against the public key, as
// Sign does for every signature (/op: one sign and one verify).
// BenchmarkSignES256 minus this is what the card costs outside
// crypto/ecdsa: parse, lint, canonical forms, header and output
// (scripts/bench reports that difference, time and allocations).
func BenchmarkCryptoES256(b *testing.B) {
	priv := testsupport.Key(b, jose.ES256).(*ecdsa.PrivateKey)
	l, err := card.Load(testsupport.Card(b, "spec-sample.json"), cardOptionsStrip)
	if err != nil {
		b.Fatal(err)
	}
	c, err := card.Canonical(l.Value, card.ProfileSpec)
	if err != nil {
		b.Fatal(err)
	}
	input := signingInput("eyJhbGciOiJFUzI1NiIsImtpZCI6ImJlbmNoIiwidHlwIjoiSk9TRSJ9", c)
	b.ReportAllocs()
	for b.Loop() {
		digest := sha256.Sum256(input)
		sig, err := ecdsa.SignASN1(rand.Reader, priv, digest[:])
		if err != nil {
			b.Fatal(err)
		}
		if !ecdsa.VerifyASN1(&priv.PublicKey, digest[:], sig) {
			b.Fatal("does not verify")
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

// BenchmarkSignBySize signs the spec sample card (2.5 KB, unknown keys
// stripped) and the same card grown to about 200 KiB with more skills,
// reporting MB/s: the large card must not cost more per byte than the small
// one (issue 15 allows 1.2×), i.e. nothing in the sign path grows faster
// than the card.
// Run: go test -run '^$' -bench SignBySize -benchtime 2s ./signer
func BenchmarkSignBySize(b *testing.B) {
	small := testsupport.Card(b, "spec-sample.json")
	v, err := strictjson.Parse(small, strictjson.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	// Grow the skills array with copies of the first skill, fresh ids.
	var large []byte
	for i := range v.Obj {
		m := &v.Obj[i]
		if m.Key != "skills" || m.Val.Kind != strictjson.Array || len(m.Val.Arr) == 0 {
			continue
		}
		first := m.Val.Arr[0]
		for n := 0; len(large) < 200<<10; n++ {
			skill := first
			skill.Obj = append([]strictjson.Member{}, first.Obj...)
			for j := range skill.Obj {
				if skill.Obj[j].Key == "id" {
					skill.Obj[j].Val = strictjson.StringValue(fmt.Sprintf("grown-%d", n))
				}
			}
			m.Val.Arr = append(m.Val.Arr, skill)
			if n%50 == 0 {
				if large, err = v.JCS(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	if len(large) < 200<<10 {
		b.Fatal("the sample card has no skills to repeat")
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"card=2.5KB", small}, {"card=200KiB", large}} {
		b.Run(c.name, func(b *testing.B) {
			k := newKey(b, jose.ES256)
			opts := Options{Keys: []Key{k.Key}, Card: cardOptionsStrip}
			if _, err := Sign(b.Context(), c.data, opts); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Sign(b.Context(), c.data, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
