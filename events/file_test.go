package events

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileRotatesAndCutsPartialLines: lines are whole JSON events; the file
// rotates by size keeping Keep files; a line a crash cut short is removed
// at the next open; files are created 0600.
func TestFileRotatesAndCutsPartialLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	msgs := messages(40)
	f, err := NewFile(FileConfig{Path: path, MaxBytes: 4096, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(msgs); i += 4 {
		if n, err := f.Send(t.Context(), msgs[i:i+4]); n != 4 || err != nil {
			t.Fatalf("Send: %d, %v", n, err)
		}
	}
	f.Close()
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("file: %v %v, want mode 0600", st, err)
	}
	var lines []string
	for _, p := range []string{path + ".2", path + ".1", path} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: %v (want the file and two rotated ones)", p, err)
		}
		if len(b) > 4096 {
			t.Fatalf("%s is %d bytes, over max_bytes", p, len(b))
		}
		lines = append(lines, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Fatalf("%s.3 exists: keep 2 keeps two", path)
	}
	// The newest lines survive, in order.
	tail := msgs[len(msgs)-len(lines):]
	for i, l := range lines {
		var e Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || l != string(tail[i].JSON) {
			t.Fatalf("line %d: %.60s (%v), want %.60s", i, l, err, tail[i].JSON)
		}
	}
	// A crash mid-line: the partial line is cut at the next open.
	whole, _ := os.ReadFile(path)
	if err := os.WriteFile(path, append(whole, `{"specversion":"1.0","id":"cut`...), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err = NewFile(FileConfig{Path: path, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Send(t.Context(), msgs[:1]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, _ := os.ReadFile(path)
	if string(got) != string(whole)+string(msgs[0].JSON)+"\n" {
		t.Fatalf("after a cut line: the file ends %q", got[max(len(got)-120, 0):])
	}
	if _, err := NewFile(FileConfig{Path: "relative.jsonl"}); err == nil {
		t.Fatal("a relative path was accepted")
	}
	if _, err := NewFile(FileConfig{Path: dir}); err == nil {
		t.Fatal("a directory was accepted")
	}
}
