//go:build cgo && !nopkcs11

package pkcs11

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadPINSource(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lf := write("lf", "1234\n")
	tests := []struct {
		name, src, want, err string
	}{
		{"newline dropped", lf, "1234", ""},
		{"file: URI", "file:" + lf, "1234", ""},
		{"file:// URI", "file://" + lf, "1234", ""},
		{"CRLF dropped", write("crlf", "1234\r\n"), "1234", ""},
		{"no newline", write("plain", "1234"), "1234", ""},
		{"only one newline dropped", write("two", "1234\n\n"), "1234\n", ""},
		{"spaces kept", write("spaces", " 12 34 \n"), " 12 34 ", ""},
		{"empty", write("empty", "\n"), "", "is empty"},
		{"too big", write("big", strings.Repeat("x", maxPINFile+1)), "", "over 1024 bytes"},
		{"missing", filepath.Join(dir, "nope"), "", "no such file"},
		{"relative", "pin.txt", "", "not absolute"},
		{"other scheme", "https://vault/pin", "", `scheme "https"`},
		{"remote host", "file://host/etc/pin", "", "with a host"},
	}
	for _, tt := range tests {
		got, err := readPINSource(tt.src, []string{dir})
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: readPINSource = %q, %v; want error %q", tt.name, got, err, tt.err)
			}
			if err != nil && strings.Contains(err.Error(), "xxxx") {
				t.Errorf("%s: error shows the file content", tt.name)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: readPINSource = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}
