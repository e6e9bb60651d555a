package strictjson

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRejects(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65)
	okDeep := strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 64)
	if _, err := Parse([]byte(okDeep), Limits{}); err != nil {
		t.Fatalf("64 levels must pass the default depth cap: %v", err)
	}
	tests := []struct {
		name, in   string
		lim        Limits
		path, rule string
	}{
		{"too large", `{"name":"` + strings.Repeat("x", 300) + `"}`, Limits{MaxBytes: 100}, "$", RuleSize},
		{"default size cap", `{"a":"` + strings.Repeat("x", DefaultMaxBytes) + `"}`, Limits{}, "$", RuleSize},
		{"too deep", deep, Limits{}, "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a", RuleDepth},
		{"depth cap configurable", `{"skills":[{"tags":["x"]}]}`, Limits{MaxDepth: 2}, "skills[0]", RuleDepth},
		{"too many items", `{"skills":[` + strings.Repeat(`{},`, 4096) + `{}]}`, Limits{MaxItems: 4096}, "skills", RuleMaxItems},
		{"item cap configurable", `{"skills":[{"tags":["a","b","c"]}]}`, Limits{MaxItems: 2}, "skills[0].tags", RuleMaxItems},
		{"too many values", `{"skills":[` + strings.Repeat(`{"tags":["a","b","c","d"]},`, 20000/6) + `{}]}`, Limits{MaxValues: 20000}, "skills[3333]", RuleMaxValues},
		{"value cap configurable", `{"name":"a","skills":[{"id":"x"}]}`, Limits{MaxValues: 3}, "skills[0]", RuleMaxValues},
		{"duplicate key", `{"name":"a","name":"b"}`, Limits{}, "name", RuleDuplicateKey},
		{"duplicate key after unescape", `{"skills":[{"id":"a","\u0069d":"b"}]}`, Limits{}, "skills[0].id", RuleDuplicateKey},
		{"duplicate key in large object", `{"a0":0,"a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6,"a7":7,"a8":8,"a9":9,"b0":0,"b1":1,"b2":2,"b3":3,"b4":4,"b5":5,"b6":6,"a3":7}`, Limits{}, "a3", RuleDuplicateKey},
		{"invalid utf8 in string", "{\"name\":\"caf\xe9\"}", Limits{}, "name", RuleUTF8},
		{"invalid utf8 in key", "{\"n\xffme\":\"x\"}", Limits{}, "$", RuleUTF8},
		{"overlong utf8", "{\"name\":\"\xc0\xaf\"}", Limits{}, "name", RuleUTF8},
		{"utf8 surrogate encoded", "{\"name\":\"\xed\xa0\x80\"}", Limits{}, "name", RuleUTF8},
		{"invalid utf8 outside string", "{\"name\":\xff}", Limits{}, "name", RuleUTF8},
		{"lone high surrogate", `{"description":"x\ud800y"}`, Limits{}, "description", RuleSurrogate},
		{"lone high surrogate at end", `{"description":"\ud83d"}`, Limits{}, "description", RuleSurrogate},
		{"high surrogate then non-low", `{"description":"\ud83d\u0041"}`, Limits{}, "description", RuleSurrogate},
		{"lone low surrogate", `{"skills":[{"name":"\udc00"}]}`, Limits{}, "skills[0].name", RuleSurrogate},
		{"number overflow", `{"capabilities":{"extensions":[{"params":{"n":1e400}}]}}`, Limits{}, "capabilities.extensions[0].params.n", RuleNumberRange},
		{"negative overflow", `{"x":-1.8e308}`, Limits{}, "x", RuleNumberRange},
		{"number underflow", `{"x":1e-400}`, Limits{}, "x", RuleNumberRange},
		{"trailing data", `{"name":"a"} {"name":"b"}`, Limits{}, "$", RuleTrailingData},
		{"trailing garbage", `{"name":"a"}x`, Limits{}, "$", RuleTrailingData},
		{"top-level array", `[{"name":"a"}]`, Limits{}, "$", RuleNotObject},
		{"top-level string", `"card"`, Limits{}, "$", RuleNotObject},
		{"top-level number", `42`, Limits{}, "$", RuleNotObject},
		{"top-level null", `null`, Limits{}, "$", RuleNotObject},
		{"empty input", ``, Limits{}, "$", RuleSyntax},
		{"byte order mark", "\xef\xbb\xbf{}", Limits{}, "$", RuleSyntax},
		{"unterminated object", `{"name":"a"`, Limits{}, "$", RuleSyntax},
		{"unterminated string", `{"name":"a`, Limits{}, "name", RuleSyntax},
		{"raw control char", "{\"name\":\"a\nb\"}", Limits{}, "name", RuleSyntax},
		{"bad escape", `{"name":"\x41"}`, Limits{}, "name", RuleSyntax},
		{"bad unicode escape", `{"name":"\u12G4"}`, Limits{}, "name", RuleSyntax},
		{"leading zero", `{"x":01}`, Limits{}, "x", RuleSyntax},
		{"missing digit after dot", `{"x":1.}`, Limits{}, "x", RuleSyntax},
		{"plus sign", `{"x":+1}`, Limits{}, "x", RuleSyntax},
		{"NaN", `{"x":NaN}`, Limits{}, "x", RuleSyntax},
		{"single quotes", `{'name':'a'}`, Limits{}, "$", RuleSyntax},
		{"trailing comma", `{"tags":["a",]}`, Limits{}, "tags[1]", RuleSyntax},
		{"comment", `{"a":1 /* c */}`, Limits{}, "$", RuleSyntax},
		{"bad literal", `{"a":tru}`, Limits{}, "a", RuleSyntax},
		{"missing colon", `{"a" 1}`, Limits{}, "$", RuleSyntax},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in), tc.lim)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) = %v, want *strictjson.Error", abbreviate(tc.in), err)
			}
			if e.Path != tc.path || e.Rule != tc.rule {
				t.Fatalf("Parse(%q): got path %q rule %q (%v), want path %q rule %q", abbreviate(tc.in), e.Path, e.Rule, err, tc.path, tc.rule)
			}
			if strings.Contains(e.Reason, "\n") || e.Reason == "" {
				t.Fatalf("reason must be one non-empty line: %q", e.Reason)
			}
		})
	}
}

// A zero MaxValues or MaxItems is no cap: JWK Sets and revocation documents
// may hold more entries than a card (card.Parse sets caps of its own).
func TestParseUncappedByDefault(t *testing.T) {
	in := `{"keys":[` + strings.Repeat(`{"kid":"k","use":"sig"},`, 10000) + `{}]}`
	v, err := Parse([]byte(in), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if keys, _ := v.Get("keys"); len(keys.Arr) != 10001 {
		t.Fatalf("got %d keys", len(keys.Arr))
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name, in string
		check    func(Value) bool
	}{
		{"surrogate pair", `{"s":"\ud83d\ude00"}`, func(v Value) bool { s, _ := v.Get("s"); return s.Str == "😀" }},
		{"escapes", `{"s":"\"\\\/\b\f\n\r\t\u00e9"}`, func(v Value) bool { s, _ := v.Get("s"); return s.Str == "\"\\/\b\f\n\r\té" }},
		{"raw non-ascii and U+2028", "{\"s\":\"Caf\u00e9 \u2028 🎉\"}", func(v Value) bool { s, _ := v.Get("s"); return s.Str == "Café \u2028 🎉" }},
		{"numbers keep literal", `{"n":[0,-0,1.50,1e-6,1E+2,-12.5e3]}`, func(v Value) bool {
			n, _ := v.Get("n")
			return len(n.Arr) == 6 && n.Arr[2].Str == "1.50" && n.Arr[5].Str == "-12.5e3"
		}},
		{"largest double", `{"n":1.7976931348623157e308}`, func(v Value) bool { return v.Has("n") }},
		{"smallest subnormal", `{"n":5e-324}`, func(v Value) bool { return v.Has("n") }},
		{"zero with exponent", `{"n":0e-999}`, func(v Value) bool { return v.Has("n") }},
		{"whitespace around", " \t\r\n{ \"a\" : [ ] , \"b\" : { } }\n", func(v Value) bool {
			a, _ := v.Get("a")
			b, _ := v.Get("b")
			return a.Kind == Array && len(a.Arr) == 0 && b.Kind == Object && len(b.Obj) == 0
		}},
		{"member order kept", `{"b":1,"a":2}`, func(v Value) bool { return v.Obj[0].Key == "b" && v.Obj[1].Key == "a" }},
		{"empty key", `{"":1}`, func(v Value) bool { return v.Has("") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Parse([]byte(tc.in), Limits{})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !tc.check(v) {
				t.Fatalf("Parse(%q) gave %s", tc.in, v.Compact())
			}
		})
	}
}

func TestPathString(t *testing.T) {
	root := &Path{index: -1}
	tests := []struct {
		p    *Path
		want string
	}{
		{root, "$"},
		{root.Key("skills").Index(2).Key("tags"), "skills[2].tags"},
		{root.Key("securitySchemes").Key("my scheme").Key("x"), `securitySchemes["my scheme"].x`},
		{root.Key("a").Key(""), `a[""]`},
		{root.Index(0), "[0]"},
	}
	for _, tc := range tests {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// TestParseSeparatorReasons: after an item or a member, the reason names
// what the container may go on with, and which container ran out.
func TestParseSeparatorReasons(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1 "b":2}`:    `expected ',' or '}'`,
		`{"a":[1 2]}`:      `expected ',' or ']'`,
		`{"a":1`:           "unexpected end of input inside an object",
		`{"a":[1`:          "unexpected end of input inside an array",
		`{"a":{"b":[1]} }`: "",
	} {
		_, err := Parse([]byte(in), Limits{})
		var e *Error
		switch {
		case want == "" && err != nil:
			t.Errorf("Parse(%q): %v", in, err)
		case want != "" && (!errors.As(err, &e) || e.Rule != RuleSyntax || !strings.Contains(e.Reason, want)):
			t.Errorf("Parse(%q) = %v, want a syntax error saying %q", in, err, want)
		}
	}
}

// TestCompactAndIndent: the two printed forms, empty containers included,
// which both forms write as "[]" and "{}".
func TestCompactAndIndent(t *testing.T) {
	v, err := Parse([]byte(`{"a":[1,{"b":null,"c":[]}],"d":{},"e":"x\u00e9"}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(v.Compact()), `{"a":[1,{"b":null,"c":[]}],"d":{},"e":"xé"}`; got != want {
		t.Errorf("Compact:\n%s\nwant\n%s", got, want)
	}
	want := `{
  "a": [
    1,
    {
      "b": null,
      "c": []
    }
  ],
  "d": {},
  "e": "xé"
}
`
	if got := string(v.Indent()); got != want {
		t.Errorf("Indent:\n%s\nwant\n%s", got, want)
	}
}

// TestSkipPlain: the eight-bytes-at-a-time scan stops where a byte-by-byte
// one does, for every byte that ends a run at every offset of a word.
func TestSkipPlain(t *testing.T) {
	for _, stop := range []byte{0x00, 0x1f, '"', '\\', 0x7f, 0x80, 0xc3, 0xff} {
		for at := range 20 {
			s := strings.Repeat("a", at) + string([]byte{stop}) + strings.Repeat("b", 9)
			want := at
			if plainByte[stop] {
				want = len(s)
			}
			if got := skipPlain(s, 0); got != want {
				t.Errorf("skipPlain(%q) = %d, want %d", s, got, want)
			}
		}
	}
	for _, s := range []string{"", "abc", strings.Repeat("x", 17), " !#[]~"} {
		if got := skipPlain(s, 0); got != len(s) {
			t.Errorf("skipPlain(%q) = %d, want %d", s, got, len(s))
		}
	}
}
