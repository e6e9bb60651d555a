package strictjson

import "testing"

// BenchmarkParse reads the spec's sample card (§8.5) and the same card as
// cardsign signs it (unknown keys stripped, one ES256 signature), with the
// limits card.Parse sets: the parse every sign and every verification
// starts with.
// Run: go test -run '^$' -bench 'Parse' -benchmem -cpu 1 ./strictjson
func BenchmarkParse(b *testing.B) {
	for _, c := range []struct{ name, file string }{
		{"sample", "../testdata/cards/spec-sample.json"},
		{"signed", "testdata/signed-sample.json"},
	} {
		b.Run(c.name, func(b *testing.B) {
			data := readDocuments(b, c.file)[0].data
			lim := Limits{MaxValues: 20000, MaxItems: 4096}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseAs(data, lim, "card", "an Agent Card is a JSON object"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkJCS writes the signed sample card in its RFC 8785 form: the
// canonical bytes of a JWK, a log entry or a revocation document are written
// the same way.
func BenchmarkJCS(b *testing.B) {
	v, err := Parse(readDocuments(b, "testdata/signed-sample.json")[0].data, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.JCS(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAllocations pins what the benchmarks above measure, on the signed
// sample card: a parse in at most 20 allocations (4 when the scratch pool
// is warm; it was 140 when every string and container had its own) and its
// RFC 8785 form in 2 (the writer's buffer, sized by one walk, and its
// member-order stack).
func TestAllocations(t *testing.T) {
	data := readDocuments(t, "testdata/signed-sample.json")[0].data
	lim := Limits{MaxValues: 20000, MaxItems: 4096}
	var v Value
	if n := testing.AllocsPerRun(100, func() {
		var err error
		if v, err = ParseAs(data, lim, "card", "an Agent Card is a JSON object"); err != nil {
			t.Fatal(err)
		}
	}); n > 20 {
		t.Errorf("ParseAs of the signed sample card: %.0f allocations, want at most 20", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := v.JCS(); err != nil {
			t.Fatal(err)
		}
	}); n > 2 {
		t.Errorf("JCS of the signed sample card: %.0f allocations, want at most 2", n)
	}
}
