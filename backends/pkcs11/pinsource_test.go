//go:build cgo && !nopkcs11

package pkcs11

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
)

// readPINWithin runs readPINSource, failing the test instead of hanging it
// when it blocks.
func readPINWithin(t *testing.T, src string, dirs []string) (string, error) {
	t.Helper()
	return testsupport.Within(t, "readPINSource("+src+")", func() (string, error) { return readPINSource(src, dirs) })
}

func TestPINSourceFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := testsupport.FIFO(t, filepath.Join(dir, "pin"))
	_, err := readPINWithin(t, fifo, []string{dir})
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("FIFO pin-source: %v", err)
	}
}

func TestPINSourceDirs(t *testing.T) {
	root := t.TempDir()
	allowed, outside := filepath.Join(root, "pins"), filepath.Join(root, "elsewhere")
	for _, d := range []string{allowed, outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(dir, name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const secret = "TOPSECRET-VALUE-123"
	in := write(allowed, "pin", "1234\n")
	out := write(outside, "secret", secret+"\n")
	if err := os.Symlink(out, filepath.Join(allowed, "escape")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, src string
		dirs      []string
		want, err string
	}{
		{"inside", in, []string{allowed}, "1234", ""},
		{"inside, file: URI", "file://" + in, []string{allowed}, "1234", ""},
		{"no directories configured", in, nil, "", "outside the allowed pin-source directories (allowed: none)"},
		{"outside", out, []string{allowed}, "", "outside the allowed pin-source directories"},
		{"dot-dot", allowed + "/../elsewhere/secret", []string{allowed}, "", "outside the allowed pin-source directories"},
		{"symlink pointing out", filepath.Join(allowed, "escape"), []string{allowed}, "", "outside the allowed pin-source directories"},
		{"system file", "/etc/passwd", []string{allowed}, "", "outside the allowed pin-source directories"},
		{"missing outside: no existence oracle", "/nonexistent/pin", []string{allowed}, "", "outside the allowed pin-source directories"},
		{"directory", allowed, []string{root}, "", "not a regular file"},
		{"device", "/dev/zero", []string{"/dev"}, "", "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readPINWithin(t, tt.src, tt.dirs)
			if tt.err == "" {
				if err != nil || got != tt.want {
					t.Fatalf("readPINSource = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("readPINSource = %q, %v; want error %q", got, err, tt.err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error shows the file's content: %v", err)
			}
		})
	}
	if _, err := New(Config{DefaultModule: "/x/mod.so", PINSourceDirs: []string{"pins"}}); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("relative pin-source directory: %v", err)
	}
}

// TestCheckURI: the check cardsignd runs over keys on record at start says
// which pin-source lies outside pkcs11.pin_source_dirs, without reading it.
func TestCheckURI(t *testing.T) {
	allowed := t.TempDir()
	b, err := New(Config{DefaultModule: "/usr/lib/softhsm/libsofthsm2.so", PINSourceDirs: []string{allowed}})
	if err != nil {
		t.Fatal(err)
	}
	const tok = "pkcs11:token=t;object=k"
	tests := []struct {
		uri     string
		refused string
	}{
		{tok, ""},                     // the configured PIN
		{tok + "?pin-value=1234", ""}, // refused at import, never on record
		{tok + "?pin-source=" + allowed + "/pin", ""},
		{tok + "?pin-source=/etc/cardsign/pin", "pkcs11.pin_source_dirs"},
		{tok + "?pin-source=relative/pin", "not absolute"},
	}
	for _, tc := range tests {
		err := b.CheckURI(tc.uri)
		if (err != nil) != (tc.refused != "") || (err != nil && !strings.Contains(err.Error(), tc.refused)) {
			t.Errorf("CheckURI(%s) = %v, want an error naming %q", tc.uri, err, tc.refused)
		}
	}
}

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
