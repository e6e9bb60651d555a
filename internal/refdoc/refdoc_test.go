package refdoc

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCellAndCode(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"cell pipe", Cell("a|b"), `a\|b`},
		{"cell lines", Cell("a\n  b"), "a b"},
		{"cell html", Cell("<script>"), "&lt;script&gt;"},
		{"code", Code("x"), "`x`"},
		{"code backtick", Code("a`b"), "``a`b``"},
		{"code edge backtick", Code("`a"), "`` `a ``"},
		{"code cell pipe", CodeCell("a|b"), "`a\\|b`"},
		{"anchor", Anchor(`a"b`), `<a id="a&quot;b"></a>`},
		{"duration hours", Duration(720 * time.Hour), "720h"},
		{"duration minutes", Duration(2 * time.Minute), "2m"},
		{"duration mixed", Duration(90 * time.Second), "1m30s"},
		{"placeholder number", placeholder("max-bytes", "int"), "N"},
		{"placeholder duration", placeholder("timeout", "duration"), "D"},
		{"placeholder string", placeholder("id-token-env", "string"), "ENV"},
		{"placeholder named", placeholder("key", "URI"), "URI"},
		{"placeholder bool", placeholder("tls", ""), ""},
		{"markdown code", Markdown("Text.\n\n\tkey: value\n", "yaml"), "Text.\n\n```yaml\nkey: value\n```"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestUpdateSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "page.md")
	// A missing page is stale, then written.
	if err := UpdateSection(path, "s", "one\n", "FIX", false); err == nil || !strings.Contains(err.Error(), "FIX") {
		t.Fatalf("missing page: got %v, want an error naming the fix", err)
	}
	if err := UpdateSection(path, "s", "one\n", "FIX", true); err != nil {
		t.Fatal(err)
	}
	// Text around the section is kept; a second section is appended.
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, append([]byte("intro\n"), data...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := UpdateSection(path, "t", "two\n", "FIX", true); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		content string
		stale   bool
	}{{"one\n", false}, {"one", false}, {"changed\n", true}} {
		err := UpdateSection(path, "s", tc.content, "FIX", false)
		if (err != nil) != tc.stale {
			t.Errorf("section %q: got %v, want stale %v", tc.content, err, tc.stale)
		}
		if tc.stale && err != nil && !strings.Contains(err.Error(), "+ changed") {
			t.Errorf("the error shows no diff: %v", err)
		}
	}
	data, _ = os.ReadFile(path)
	want := "intro\n" + "<!-- BEGIN GENERATED s: do not edit; change the source, then run scripts/gen -->\none\n<!-- END GENERATED s -->\n" +
		"\n<!-- BEGIN GENERATED t: do not edit; change the source, then run scripts/gen -->\ntwo\n<!-- END GENERATED t -->\n"
	if string(data) != want {
		t.Fatalf("page:\n%s\nwant:\n%s", data, want)
	}
	// A broken marker is an error, not a silent rewrite.
	if err := os.WriteFile(path, []byte(strings.Replace(want, "<!-- END GENERATED s -->", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := UpdateSection(path, "s", "one\n", "FIX", true); err == nil || !strings.Contains(err.Error(), "markers") {
		t.Fatalf("broken markers: got %v", err)
	}
}

func TestSchema(t *testing.T) {
	type root struct {
		Items []struct{ N int } `yaml:"items"`
		Wait  time.Duration     `yaml:"wait"`
		Flag  *bool             `yaml:"flag"`
		Tags  map[string]int    `yaml:"tags"`
		Skip  string            `yaml:"-"`
		Inner struct{ A int }   `yaml:"inner"`
	}
	docs, err := NewDocs(".")
	if err != nil {
		t.Fatal(err)
	}
	// Test types have no source NewDocs reads: the walk must say so.
	if _, err := Schema(root{}, docs); err == nil || !strings.Contains(err.Error(), "not found in the source") {
		t.Fatalf("got %v, want the missing source named", err)
	}
	if _, err := Schema(3, docs); err == nil {
		t.Fatal("a non-struct schema was accepted")
	}
}

func TestYAMLType(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{"", "string"}, {0, "integer"}, {uint8(0), "integer"}, {0.5, "number"}, {true, "boolean"},
		{time.Second, "duration"}, {new(bool), "boolean"}, {[]string{}, "list of strings"},
		{[]time.Duration{}, "list of durations"}, {[]struct{}{}, "list of sections"},
		{map[string]int{}, "map of string to integer"}, {struct{}{}, "section"},
	} {
		if got := yamlType(reflect.TypeOf(tc.v)); got != tc.want {
			t.Errorf("%T: got %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestFieldLinker(t *testing.T) {
	link := fieldLinker([]Field{{Path: "keys"}, {Path: "keys.dir"}, {Path: "keys.retire_grace"}, {Path: "data_dir"}, {Path: "auth.oidc"}, {Path: "auth.oidc.issuers"}})
	for _, tc := range []struct{ in, want string }{
		{`see keys.dir.`, "see [`keys.dir`](#keys.dir)."},
		{`keys.retire\_grace, keys.dir and data\_dir`, "[`keys.retire_grace`](#keys.retire_grace), [`keys.dir`](#keys.dir) and [`data_dir`](#data_dir)"},
		{`auth.oidc.issuers then auth.oidc`, "[`auth.oidc.issuers`](#auth.oidc.issuers) then [`auth.oidc`](#auth.oidc)"},
		{`the keys and --keys.dir or /etc/keys.dir`, `the keys and --keys.dir or /etc/keys.dir`},
		{"```yaml\nkeys.dir: x\n```", "```yaml\nkeys.dir: x\n```"},
		{"[`keys.dir`](#keys.dir)", "[`keys.dir`](#keys.dir)"},
	} {
		if got := link(tc.in); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestValue(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		v    any
		want string
	}{
		{false, "false"}, {true, "true"}, {"", ""}, {"x", "x"}, {0, ""}, {64, "64"}, {0.5, "0.5"},
		{time.Duration(0), ""}, {30 * 24 * time.Hour, "720h"}, {(*bool)(nil), ""}, {&yes, "true"},
		{[]string(nil), ""}, {[]string{"a", "b"}, "[a b]"},
	} {
		if got := value(reflect.ValueOf(tc.v)); got != tc.want {
			t.Errorf("%#v: got %q, want %q", tc.v, got, tc.want)
		}
	}
}
