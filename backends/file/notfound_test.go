package file

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
)

// TestOpenMissingKeyFile: a key file that is not there matches the shared
// sentinel backends.ErrKeyNotFound (and still fs.ErrNotExist), naming the
// path.
func TestOpenMissingKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gone.pem")
	_, err := Backend{}.Open(t.Context(), "file:"+path)
	var nf *KeyNotFoundError
	if !errors.Is(err, backends.ErrKeyNotFound) || !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &nf) {
		t.Fatalf("err %v, want a *KeyNotFoundError matching backends.ErrKeyNotFound and fs.ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("err %v does not name %s", err, path)
	}
}
