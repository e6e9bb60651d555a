package signer

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/strictjson"
)

// hostileCard is a valid card head with skills made of n copies of skill.
func hostileCard(n int, skill string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"name":"x","description":"d","version":"1","supportedInterfaces":[{"url":"https://a.example.com","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(skill)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// allocated returns the fewest bytes f allocated in three runs. TotalAlloc
// counts every allocation whether or not a collection ran, so the figure
// does not depend on timing; the minimum keeps a stray allocation of the
// runtime out of it.
func allocated(f func()) uint64 {
	best := uint64(1<<64 - 1)
	for range 3 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		f()
		runtime.ReadMemStats(&m1)
		best = min(best, m1.TotalAlloc-m0.TotalAlloc)
	}
	return best
}

// TestPrepareMemoryBound: the memory one call costs stays within a small
// multiple of the card, hostile or not. Issue 24 #7: a 180 KB card of 60,000
// empty skills cost 41 MB per Prepare (229× its size); the item cap
// (card.DefaultMaxItems) now refuses it within 8× its size. Under the caps,
// the costliest cards (a value per 2-3 bytes, each costing a parsed Value and
// a walk; thousands of security schemes, written by three profiles) stay
// within 64× the size cap (16 MiB), and a real card of 200 KiB within 16× its
// own size.
func TestPrepareMemoryBound(t *testing.T) {
	const sizeCap = strictjson.DefaultMaxBytes
	examples := func(elem string) string {
		return `{"id":"a","name":"b","description":"c","tags":["x"],"examples":[` + strings.Repeat(elem+",", card.DefaultMaxItems-1) + elem + `]}`
	}
	tests := []struct {
		name    string
		data    []byte
		refused string // the rule that refuses it, when it is refused
		perByte uint64 // bound in bytes allocated per byte of card; 0: 64× the size cap
	}{
		{"issue 24: 60,000 empty skills", hostileCard(60000, "{}"), strictjson.RuleMaxItems, 8},
		{"empty skills up to the item cap", hostileCard(card.DefaultMaxItems, "{}"), "lint", 0},
		{"small skills up to the value cap", hostileCard((card.DefaultMaxValues-100)/7, `{"tags":[0,0,0,0,0]}`), "lint", 0},
		{"empty strings up to the value cap", hostileCard(4, examples(`""`)), "", 0},
		{"short strings up to the value cap", hostileCard(4, examples(`"x"`)), "", 0},
		{"non-ASCII strings up to the value cap", hostileCard(4, examples(`"\u00e9"`)), "", 0},
		{"strings past the value cap", hostileCard(5, examples(`"x"`)), strictjson.RuleMaxValues, 0},
		{"security schemes up to the value cap", schemesCard(4500), "", 0},
		{"real card grown to 200 KiB", grownCard(t, 200<<10), "", 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			got := allocated(func() { _, err = Prepare(tc.data, PrepareOptions{Card: card.Options{StripUnknown: true}}) })
			switch tc.refused {
			case "":
				if err != nil {
					t.Fatalf("want the card prepared, got %v", err)
				}
			case "lint":
				if _, ok := err.(*card.LintError); !ok {
					t.Fatalf("want lint errors, got %v", err)
				}
			default:
				ce, ok := err.(*strictjson.Error)
				if !ok || ce.Rule != tc.refused {
					t.Fatalf("want the card refused by %s, got %v", tc.refused, err)
				}
			}
			limit := uint64(64 * sizeCap)
			if tc.perByte > 0 {
				limit = tc.perByte * uint64(len(tc.data))
			}
			t.Logf("%d bytes of card, %d bytes allocated (%.1f× the card), limit %d", len(tc.data), got, float64(got)/float64(len(tc.data)), limit)
			if got > limit {
				t.Errorf("Prepare allocated %d bytes for a card of %d bytes, over the bound of %d", got, len(tc.data), limit)
			}
		})
	}
}

// grownCard is the spec sample card with copies of its first skill (fresh
// ids) until it reaches size bytes.
func grownCard(t *testing.T, size int) []byte {
	v, err := strictjson.Parse(testsupport.Card(t, "spec-sample.json"), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.Obj {
		m := &v.Obj[i]
		if m.Key != "skills" {
			continue
		}
		first := m.Val.Arr[0]
		for n := 0; ; n++ {
			skill := first
			skill.Obj = append([]strictjson.Member{}, first.Obj...)
			for j := range skill.Obj {
				if skill.Obj[j].Key == "id" {
					skill.Obj[j].Val = strictjson.StringValue("grown-" + strings.Repeat("x", n%7) + string(rune('a'+n%26)) + strictjson.IntValue(int64(n)).Str)
				}
			}
			m.Val.Arr = append(m.Val.Arr, skill)
			if n%20 == 0 {
				if data := v.Compact(); len(data) >= size {
					return data
				}
			}
		}
	}
	t.Fatal("the sample card has no skills")
	return nil
}

// schemesCard is a valid card with n bearer security schemes: the sdk
// profile and @a2a-js/sdk's resolver path (which drops them) each write it.
func schemesCard(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"name":"x","description":"d","version":"1","supportedInterfaces":[{"url":"https://a.example.com","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"a","name":"b","description":"c","tags":["x"]}],"securitySchemes":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"s%d":{"httpAuthSecurityScheme":{"scheme":"bearer"}}`, i)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}
