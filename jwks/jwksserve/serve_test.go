package jwksserve

import (
	"reflect"
	"testing"
)

func TestSplitETags(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`"a"`, []string{`"a"`}},
		{`"a", "b"`, []string{`"a"`, `"b"`}},
		{`W/"a","b"`, []string{`W/"a"`, `"b"`}},
		{`"a,b", "c"`, []string{`"a,b"`, `"c"`}}, // a comma inside quotes
		{` ,, "a" ,`, []string{`"a"`}},
		{`*`, []string{`*`}},
		{`junk, "a"`, []string{`junk`, `"a"`}},
		{`"a", "unterminated`, []string{`"a"`}},
		{``, nil},
	}
	for _, tt := range tests {
		if got := splitETags(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitETags(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestETagListMatches(t *testing.T) {
	const tag = `"abc"`
	tests := []struct {
		name   string
		fields []string
		want   bool
	}{
		{"exact", []string{`"abc"`}, true},
		{"in a list", []string{`"x", "abc"`}, true},
		{"second header line", []string{`"x"`, `"abc"`}, true},
		{"star", []string{`*`}, true},
		{"weak form of our tag", []string{`W/"abc"`}, true},
		{"other tag", []string{`"abd"`}, false},
		{"unquoted", []string{`abc`}, false},
		{"prefix only", []string{`"ab"`}, false},
		{"none", nil, false},
		{"empty", []string{""}, false},
	}
	for _, tt := range tests {
		if got := ETagListMatches(tt.fields, tag); got != tt.want {
			t.Errorf("%s: ETagListMatches(%q) = %v, want %v", tt.name, tt.fields, got, tt.want)
		}
	}
}
