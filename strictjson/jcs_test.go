package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/gowebpki/jcs"
)

// gowebpki/jcs is the oracle: our writer must give jcs.Transform's bytes for
// every document both accept.

// jcsCases are adversarial documents for the RFC 8785 writer.
func jcsCases() []string {
	deep := strings.Repeat(`{"a":[`, 31) + `1` + strings.Repeat(`]}`, 31)
	var controls strings.Builder
	controls.WriteString(`{"c":"`)
	for c := 0; c < 0x20; c++ {
		controls.WriteString(`\u00` + strconv.FormatInt(int64(c>>4), 16) + strconv.FormatInt(int64(c&15), 16))
	}
	controls.WriteString(`\u007f\u0080\u2028\u2029\ufeff\/\"\\"}`)
	return []string{
		`{}`,
		`{"a":[],"b":{},"c":"","d":null,"e":true,"f":false}`,
		// UTF-16 order: U+E000..U+FFFF after astral characters, which
		// sort among the surrogates; byte order would put them first.
		"{\"\uFB01\":1,\"😀\":2,\"a\":3,\"\uE000\":4,\"\U0010FFFF\":5,\"\uFFFF\":6,\"\uD7FF\":7,\"\":8,\"aa\":9,\"a\\u0000\":10}",
		"{\"😀a\":1,\"😀\":2,\"😁\":3,\"\U00010000\":4,\"\uFFFD\":5,\"é\":6,\"e\":7,\"\u0080\":8,\"\u07FF\":9,\"\u0800\":10}",
		`{"\ud83d\ude00":"\ud83d\ude00","\uE000":"\uE000"}`,
		// Numbers at the edges of a double and of ECMAScript's formats.
		`{"n":[0,-0,0.0,-0.0,0e10,1,-1,1.0,1.5,-1.5,100,1e2,1E2,1e+2,1e-2,0.1,0.2,0.30000000000000004]}`,
		`{"n":[5e-324,-5e-324,2.2250738585072014e-308,2.225073858507201e-308,1.7976931348623157e308,-1.7976931348623157e308]}`,
		`{"n":[1e21,1e+21,999999999999999900000,1e20,123456789012345680000,1e-6,1e-7,0.000001,0.0000001,1.5e-7]}`,
		`{"n":[9007199254740991,9007199254740992,9007199254740993,-9007199254740993,123456789012345,1234567890123456,12345678901234567890]}`,
		`{"n":[4.35,0.001,333333333.33333329,1e23,5e-7,1.2e-6,295147905179352830000,4.5e15,4.5e16,100000000000000000000]}`,
		// Escapes: short forms, \u00xx for other controls, the rest
		// literal (U+007F, U+2028 and a BOM included).
		controls.String(),
		"{\"s\":\"Caf\\u00e9 é \u2028 🎉 \\ud83c\\udf89 \\t\\n\\r\\b\\f tab\\there\"}",
		deep,
		`{"z":1,"y":{"b":2,"a":[{"d":4,"c":3}]},"x":[3,2,1]}`,
		"{ \"a\" : [ 1 , 2 ] ,\n\t\"b\" : { } }",
	}
}

func checkOracle(t *testing.T, name string, data []byte) {
	t.Helper()
	v, err := Parse(data, Limits{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatalf("%s: Parse: %v", name, err)
	}
	want, err := jcs.Transform(data)
	if err != nil {
		t.Fatalf("%s: jcs.Transform: %v", name, err)
	}
	got, err := v.JCS()
	if err != nil {
		t.Fatalf("%s: JCS: %v", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got %s\nwant %s", name, got, want)
	}
}

func TestJCSMatchesOracle(t *testing.T) {
	for i, c := range jcsCases() {
		checkOracle(t, "case "+strconv.Itoa(i), []byte(c))
	}
	for _, d := range readDocuments(t, "../testdata/cards/*.json", pythonVectors+"/*.json") {
		checkOracle(t, d.name, d.data)
	}
}

// Every number a double holds is written as jcs.NumberToJSON writes it,
// whatever literal denotes it.
func TestJCSNumbersMatchOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(lit string) {
		t.Helper()
		got, ok := appendJCSNumber(nil, lit)
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil {
			if ok {
				t.Fatalf("%s: accepted, ParseFloat: %v", lit, err)
			}
			return
		}
		want, err := jcs.NumberToJSON(f)
		if err != nil || !ok || string(got) != want {
			t.Fatalf("%s: got %q %v, want %q %v", lit, got, ok, want, err)
		}
	}
	for range 20000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		check(strconv.FormatFloat(f, 'g', -1, 64))
		check(strconv.FormatFloat(f, 'e', 20, 64))
	}
	for range 20000 {
		n := r.Int64N(1_000_000_000_000_000_000) >> r.IntN(60)
		check(strconv.FormatInt(n, 10))
		check(strconv.FormatInt(-n, 10))
	}
	for _, lit := range []string{"0", "-0", "999999999999999", "-999999999999999", "1000000000000000", "9007199254740993", "1e21", "1e-7", "5e-324", "1.7976931348623157e308"} {
		check(lit)
	}
	for _, lit := range []string{"", "-", "01", "1.", ".1", "+1", "0x10", "Inf", "NaN", "1_000", "1e", "1e+", "--1", "1e400", "-1e400", " 1"} {
		if got, ok := appendJCSNumber(nil, lit); ok {
			t.Errorf("%q: accepted as %q", lit, got)
		}
	}
}

// compareUTF16 orders as comparing utf16.Encode outputs does.
func TestCompareUTF16(t *testing.T) {
	alphabet := []rune{0, 'a', 'b', 0x7f, 0x80, 0xe9, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfb01, 0xfffd, 0xffff, 0x10000, 0x1f600, 0x1f601, 0x10ffff}
	r := rand.New(rand.NewPCG(3, 4))
	word := func() string {
		rs := make([]rune, r.IntN(4))
		for i := range rs {
			rs[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(rs)
	}
	sign := func(x int) int { return min(max(x, -1), 1) }
	for range 50000 {
		a, b := word(), word()
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := compareUTF16(a, b); sign(got) != want {
			t.Fatalf("compareUTF16(%+q, %+q) = %d, want %d", a, b, got, want)
		}
	}
}

// What RFC 8785 cannot write is refused with a path, in document order.
func TestJCSRefuses(t *testing.T) {
	tests := []struct {
		v          Value
		rule, path string
	}{
		{ObjectValue(Member{"a", StringValue("ok")}, Member{"b", StringValue("\xff")}), RuleUTF8, "b"},
		{ObjectValue(Member{"z", ArrayValue(StringValue("\xc3"))}, Member{"a", Value{Kind: Number, Str: "0x10"}}), RuleUTF8, "z[0]"},
		{ObjectValue(Member{"\xfe", BoolValue(true)}), RuleUTF8, "$"},
		{ObjectValue(Member{"n", Value{Kind: Number, Str: "Inf"}}), RuleNumberRange, "n"},
		{ObjectValue(Member{"n", Value{Kind: Number, Str: "1e400"}}), RuleNumberRange, "n"},
		{ObjectValue(Member{"k", IntValue(1)}, Member{"k", IntValue(2)}), RuleDuplicateKey, "k"},
		{ObjectValue(Member{"o", Value{Kind: 42}}), RuleSyntax, "o"},
	}
	for i, tc := range tests {
		_, err := tc.v.JCS()
		var e *Error
		if !errors.As(err, &e) || e.Rule != tc.rule || e.Path != tc.path {
			t.Errorf("case %d: got %v, want rule %s at %s", i, err, tc.rule, tc.path)
		}
	}
}

// FuzzJCSDifferential: for every document that both our strict parser and
// jcs.Transform accept, our RFC 8785 writer gives jcs.Transform's bytes.
func FuzzJCSDifferential(f *testing.F) {
	addDocumentSeeds(f)
	for _, c := range jcsCases() {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data, Limits{MaxBytes: 1 << 16, MaxDepth: 64})
		if err != nil {
			return
		}
		got, err := v.JCS()
		if err != nil {
			t.Fatalf("JCS refuses a parsed document: %v", err)
		}
		if want, err := jcs.Transform(data); err == nil && !bytes.Equal(got, want) {
			t.Fatalf("JCS differs from jcs.Transform:\n got %q\nwant %q", got, want)
		}
	})
}

// TestStringWritersPerByte: the writers that skip a word at a time escape,
// and flag as not plain, exactly the bytes a byte-by-byte writer does, at
// every offset of a word.
func TestStringWritersPerByte(t *testing.T) {
	for _, c := range []string{"\x00", "\x1f", "\"", "\\", "\x7f", "é", "\u2028", " ", "~"} {
		for at := range 20 {
			s := strings.Repeat("a", at) + c + strings.Repeat("b", 9)
			want, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			// encoding/json escapes <, >, & and U+2028/9 as well; these
			// cases hold none but U+2028, which JSON leaves literal.
			want = bytes.ReplaceAll(want, []byte(`\u2028`), []byte("\u2028"))
			if got := AppendString(nil, s); !bytes.Equal(got, want) {
				t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
			}
			w := NewJCSWriter(0)
			w.WriteValue(StringValue(s))
			_, plain, ok := w.Result()
			if wantPlain := c[0] < 0x7f; plain != wantPlain || !ok {
				t.Errorf("JCS of %q: plain %v ok %v, want plain %v", s, plain, ok, wantPlain)
			}
		}
	}
}
