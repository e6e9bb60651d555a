package strictjson

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// pythonVectors are the a2a-python test vectors: non-ASCII text, Struct
// numbers, key order.
const pythonVectors = "../testdata/vectors/a2a-python-1.1.0"

// document is a test file's name and contents.
type document struct {
	name string
	data []byte
}

// readDocuments reads the files that the glob patterns match; each pattern
// must match some.
func readDocuments(tb testing.TB, patterns ...string) []document {
	tb.Helper()
	var docs []document
	for _, pattern := range patterns {
		files, _ := filepath.Glob(pattern)
		if len(files) == 0 {
			tb.Fatalf("no documents match %s", pattern)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				tb.Fatal(err)
			}
			docs = append(docs, document{file, data})
		}
	}
	return docs
}

// addDocumentSeeds seeds a fuzz target with the cards under testdata/cards
// and the a2a-python inputs; the targets' own corpora live in testdata/fuzz.
func addDocumentSeeds(f *testing.F) {
	for _, d := range readDocuments(f, "../testdata/cards/*.json", pythonVectors+"/*.input.json") {
		f.Add(d.data)
	}
}

// FuzzParse: Parse never panics, and what it accepts round-trips: printing
// the value and parsing it again gives the same value.
func FuzzParse(f *testing.F) {
	addDocumentSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data, Limits{MaxBytes: 1 << 16, MaxDepth: 32})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Parse returned %T, want *strictjson.Error: %v", err, err)
			}
			return
		}
		c := v.Compact()
		w, err := Parse(c, Limits{MaxBytes: 1 << 20, MaxDepth: 32})
		if err != nil {
			t.Fatalf("Parse rejects its own output %q: %v", c, err)
		}
		if !bytes.Equal(w.Compact(), c) {
			t.Fatalf("round trip changed the value:\n%q\n%q", c, w.Compact())
		}
	})
}

// FuzzParseDifferential: the parser accepts exactly what the parser of
// commit e159769 (oldparse_test.go) accepted, yields the same tree (empty
// containers as empty, not nil, slices) and refuses the rest with the same
// path, rule, reason and offset, under small caps so that every cap is hit.
func FuzzParseDifferential(f *testing.F) {
	addDocumentSeeds(f)
	for _, s := range []string{`{"a":"\u00e9\ud83d\ude00x","b":[1,-0.5e3,1e-400,{}]}`, "{\"k\":\"caf\xe9\"}", `{"a":1,"a":2}`, `{"a":[[[[1]]]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, lim := range []Limits{{}, {MaxBytes: 1 << 12, MaxDepth: 3, MaxValues: 40, MaxItems: 5}} {
			want, wantErr := oldParseAs(data, lim, "doc", "want an object")
			got, err := ParseAs(data, lim, "doc", "want an object")
			if !reflect.DeepEqual(err, wantErr) {
				t.Fatalf("ParseAs(%q, %+v):\n got error %#v\nwant error %#v", data, lim, err, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("ParseAs(%q, %+v):\n got %s\nwant %s", data, lim, got.Compact(), want.Compact())
			}
		}
	})
}
