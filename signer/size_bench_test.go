package signer

import (
	"fmt"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/strictjson"
)

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
