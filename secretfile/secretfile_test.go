package secretfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
)

func TestOpenAndReadAll(t *testing.T) {
	dir := t.TempDir()
	small := testsupport.WriteFileMode(t, filepath.Join(dir, "small"), "1234\n", 0o600)
	big := testsupport.WriteFileMode(t, filepath.Join(dir, "big"), "0123456789abcdef", 0o600)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path       string
		notRegular bool
		tooLarge   bool
	}{
		{path: small},
		{path: big, tooLarge: true},
		{path: fifo, notRegular: true}, // must return at once, not wait for a writer
		{path: dir, notRegular: true},
		{path: "/dev/zero", notRegular: true},
	}
	for _, tc := range tests {
		f, st, err := Open(tc.path, 0)
		var nr *NotRegularError
		if tc.notRegular != errors.As(err, &nr) {
			t.Errorf("Open(%s) = %v, want NotRegularError: %v", tc.path, err, tc.notRegular)
		}
		if err != nil {
			continue
		}
		data, err := ReadAll(f, st, 8)
		f.Close()
		var tl *TooLargeError
		if tc.tooLarge != errors.As(err, &tl) {
			t.Errorf("ReadAll(%s) = %q, %v; want TooLargeError: %v", tc.path, data, err, tc.tooLarge)
		}
	}
}

// ReadFile returns at once for what is not a small regular file: /dev/zero
// would otherwise be read until memory runs out, and a FIFO would wait for a
// writer forever.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := testsupport.WriteFileMode(t, filepath.Join(dir, "small"), "1234\n", 0o600)
	sparse := testsupport.WriteFileMode(t, filepath.Join(dir, "sparse"), "", 0o600)
	if err := os.Truncate(sparse, 200<<20); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want string // "" reads "1234\n"
	}{
		{small, ""},
		{sparse, sparse + " is over the 8-byte limit"},
		{fifo, fifo + " is not a regular file (it is a FIFO)"},
		{"/dev/zero", "/dev/zero is not a regular file (it is a character device)"},
		{dir, dir + " is not a regular file (it is a directory)"},
	} {
		data, err := ReadFile(tc.path, 8)
		switch {
		case tc.want == "" && (err != nil || string(data) != "1234\n"):
			t.Errorf("ReadFile(%s) = %q, %v", tc.path, data, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("ReadFile(%s) = %q, %v; want the error %q", tc.path, data, err, tc.want)
		}
	}
}

func TestWithin(t *testing.T) {
	root := t.TempDir()
	allowed := filepath.Join(root, "allowed")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{allowed, filepath.Join(allowed, "sub"), outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	secret := testsupport.WriteFileMode(t, filepath.Join(outside, "secret"), "x", 0o600)
	if err := os.Symlink(secret, filepath.Join(allowed, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(allowed, filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		ok   bool
	}{
		{filepath.Join(allowed, "k.pem"), true},
		{filepath.Join(allowed, "sub", "k.pem"), true},
		{filepath.Join(root, "alias", "k.pem"), true}, // through a link to the allowed directory
		{filepath.Join(allowed, "..", "outside", "secret"), false},
		{filepath.Join(allowed, "link-out"), false}, // a link inside pointing out
		{filepath.Join(outside, "secret"), false},
		{filepath.Join(outside, "missing"), false},
	}
	for _, tc := range tests {
		if _, ok := Within(tc.path, []string{allowed}); ok != tc.ok {
			t.Errorf("Within(%s) = %v, want %v", tc.path, ok, tc.ok)
		}
	}
}
