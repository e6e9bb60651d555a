package card

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cardsign/cardsign/strictjson"
)

// checkOneWalk: the one-walk spec bytes are the projected tree's, and when
// the walk calls a card clean, the other profiles' bytes are the same.
func checkOneWalk(t *testing.T, v strictjson.Value) {
	t.Helper()
	spec, clean, ok := canonicalSpec(v)
	want, err := canonicalProjected(v, ProfileSpec)
	if !ok {
		if err == nil {
			t.Fatalf("the walk refuses what projection writes: %s", want)
		}
		return
	}
	if err != nil || !bytes.Equal(spec, want) {
		t.Fatalf("spec: walk %s, projection %s (%v)", spec, want, err)
	}
	if !clean {
		return
	}
	for _, p := range []Profile{ProfileSDK, ProfilePythonASCII} {
		if got, err := canonicalProjected(v, p); err != nil || !bytes.Equal(got, spec) {
			t.Fatalf("clean card, but %s is %s (%v), spec %s", p, got, err, spec)
		}
	}
}

func TestCanonicalOneWalk(t *testing.T) {
	files, _ := filepath.Glob("../testdata/cards/*.json")
	vectors, _ := filepath.Glob(pythonVectors + "/*.input.json")
	cleanSeen := 0
	for _, f := range append(files, vectors...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, strip := range []bool{false, true} {
			l, err := Load(data, Options{StripUnknown: strip})
			if err != nil {
				t.Fatal(err)
			}
			checkOneWalk(t, l.Value)
			if _, clean, _ := canonicalSpec(l.Value); clean {
				cleanSeen++
			}
		}
	}
	if cleanSeen == 0 {
		t.Fatal("no card took the one-walk path")
	}
	for _, in := range []string{
		`{"name":"A","securitySchemes":{"k":{"mtlsSecurityScheme":{"description":"m"},"httpAuthSecurityScheme":{"scheme":"bearer"}}}}`,
		`{"name":"A","capabilities":{"extensions":[{"uri":"u","params":{"__proto__":"x","a":"b"}}]}}`,
		`{"name":"A","capabilities":{"extensions":[{"uri":"u","params":{"a":1}}]}}`,
		`{"name":"A","description":"é"}`,
		`{"name":"A","capabilities":{}}`,
		`{"name":"A","skills":[]}`,
		`{"name":"A","skills":[{"id":"s","tags":[]}]}`,
		`{"name":"A","skills":"x"}`,
		`{"name":"A","defaultInputModes":[1]}`,
		`{"name":"A","securitySchemes":{"k":"x"}}`,
		`{"name":"A","securitySchemes":{"b":{"mtlsSecurityScheme":{"description":"m"}},"a":{"apiKeySecurityScheme":{"name":"n","location":"header"}}}}`,
		`{"name":"A","icon_url":"https://x"}`,
		`{"name":"A","signatures":[{"protected":"x","signature":"y"}],"version":"1"}`,
	} {
		l, err := Load([]byte(in), Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkOneWalk(t, l.Value)
	}
}

// Forms that the sdk profile writes otherwise only because of a second oneof
// member or a "__proto__" key say so, and carry the sdk bytes.
func TestCanonicalFormsShadowedAndProto(t *testing.T) {
	for _, tc := range []struct{ in, div string }{
		{`{"name":"A","securitySchemes":{"k":{"mtlsSecurityScheme":{"description":"m"},"httpAuthSecurityScheme":{"scheme":"bearer"}}}}`, `securitySchemes.k.mtlsSecurityScheme (a second member of its oneof)`},
		{`{"name":"A","capabilities":{"extensions":[{"uri":"u","params":{"__proto__":"x","a":"b"}}]}}`, `capabilities.extensions[0].params.__proto__ (a "__proto__" key)`},
	} {
		l, err := Load([]byte(tc.in), Options{})
		if err != nil {
			t.Fatal(err)
		}
		f, err := CanonicalForms(l.Value)
		if err != nil {
			t.Fatal(err)
		}
		sdk, _ := canonicalProjected(l.Value, ProfileSDK)
		if !bytes.Equal(f.SDK, sdk) || bytes.Equal(f.SDK, f.Spec) {
			t.Errorf("%s: forms.SDK %s, want %s (spec %s)", tc.in, f.SDK, sdk, f.Spec)
		}
		if !slices.Contains(f.Divergences, tc.div) {
			t.Errorf("%s: divergences %q, want %q", tc.in, f.Divergences, tc.div)
		}
	}
}

// checkAllEmpty: allEmpty is dropEmpty(v).Kind == Null, for v and every
// value inside it.
func checkAllEmpty(t *testing.T, v strictjson.Value) {
	t.Helper()
	if got, want := allEmpty(v), dropEmpty(v).Kind == strictjson.Null; got != want {
		t.Fatalf("allEmpty(%s) = %v, dropEmpty says %v", v.Compact(), got, want)
	}
	for _, e := range v.Arr {
		checkAllEmpty(t, e)
	}
	for _, m := range v.Obj {
		checkAllEmpty(t, m.Val)
	}
}

func TestAllEmpty(t *testing.T) {
	for _, in := range []string{
		`{}`, `{"a":""}`, `{"a":[null,"",{},[]]}`, `{"__proto__":1}`, `{"a":{"__proto__":"x"},"b":[[""]]}`,
		`{"a":0}`, `{"a":false}`, `{"a":[[""],"x"]}`, `{"a":{"b":{"c":" "}}}`,
	} {
		v, err := strictjson.Parse([]byte(in), strictjson.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		checkAllEmpty(t, v)
	}
}

// FuzzCanonicalOneWalk: the one-walk spec bytes of a card are those of its
// projected tree, and allEmpty agrees with dropEmpty. The RFC 8785 writer
// itself is fuzzed against its oracle in strictjson (FuzzJCSDifferential).
func FuzzCanonicalOneWalk(f *testing.F) {
	addCardSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := strictjson.Parse(data, strictjson.Limits{MaxBytes: 1 << 16, MaxDepth: 64})
		if err != nil {
			return
		}
		checkOneWalk(t, v)
		checkAllEmpty(t, v)
	})
}
