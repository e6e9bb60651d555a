package card

import (
	"os"
	"testing"

	"github.com/cardsign/cardsign/strictjson"
	"github.com/gowebpki/jcs"
)

func sampleCard(b *testing.B) []byte {
	data, err := os.ReadFile("../testdata/cards/spec-sample.json")
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkCanonicalize is the whole path from card bytes to canonical
// bytes: strict parse, presence rules, RFC 8785.
func BenchmarkCanonicalize(b *testing.B) {
	data := sampleCard(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		l, err := Load(data, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Canonical(l.Value, ProfileSpec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalizeSDK(b *testing.B) {
	data := sampleCard(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		l, err := Load(data, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Canonical(l.Value, ProfileSDK); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJCSTransform is the reference: RFC 8785 alone over the same bytes.
func BenchmarkJCSTransform(b *testing.B) {
	data := sampleCard(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jcs.Transform(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	data := sampleCard(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, strictjson.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
