package card

import (
	"testing"

	"github.com/cardsign/cardsign/strictjson"
	"github.com/gowebpki/jcs"
)

// benchSample runs step over the spec sample card once per iteration,
// reporting throughput in card bytes, so that the benchmarks below differ
// only in the work they time.
func benchSample(b *testing.B, step func(data []byte) error) {
	data := mustRead(b, "../testdata/cards/spec-sample.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := step(data); err != nil {
			b.Fatal(err)
		}
	}
}

// canonicalize is the whole path from card bytes to canonical bytes: strict
// parse, presence rules, RFC 8785.
func canonicalize(p Profile) func([]byte) error {
	return func(data []byte) error {
		l, err := Load(data, Options{})
		if err != nil {
			return err
		}
		_, err = Canonical(l.Value, p)
		return err
	}
}

func BenchmarkCanonicalize(b *testing.B)    { benchSample(b, canonicalize(ProfileSpec)) }
func BenchmarkCanonicalizeSDK(b *testing.B) { benchSample(b, canonicalize(ProfileSDK)) }

// BenchmarkJCSTransform is the reference: RFC 8785 alone over the same bytes.
func BenchmarkJCSTransform(b *testing.B) {
	benchSample(b, func(data []byte) error {
		_, err := jcs.Transform(data)
		return err
	})
}

func BenchmarkParse(b *testing.B) {
	benchSample(b, func(data []byte) error {
		_, err := Parse(data, strictjson.Limits{})
		return err
	})
}
