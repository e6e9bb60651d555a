package file

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/cardsign/cardsign/backends"
)

// Scheme is the URI scheme this backend registers.
const Scheme = "file"

// MaxFileSize caps a key file. The largest supported key (RSA 4096 as a JWK)
// is about 4 KiB; anything much bigger is not a key file.
const MaxFileSize = 64 << 10

func init() { backends.Register(Scheme, Backend{}) }

// Backend opens and creates keys in local files. The zero value is ready.
type Backend struct{}

var (
	_ backends.Backend = Backend{}
	_ backends.Creator = Backend{}
)

// Open reads the private key at the path of a file: URI. A JWK's "alg" and
// "kid" members are passed on in the Handle; PEM keys have neither.
func (Backend) Open(ctx context.Context, uri string) (backends.Handle, error) {
	path, err := Path(uri)
	if err != nil {
		return backends.Handle{}, err
	}
	if err := ctx.Err(); err != nil {
		return backends.Handle{}, fmt.Errorf("file: %w", err)
	}
	data, err := readKeyFile(path)
	if err != nil {
		return backends.Handle{}, err
	}
	defer clear(data) // best effort: fewer copies of the key in memory
	return parseKey(path, data)
}

// Path returns the file path of a file: URI (see the package comment for
// the accepted forms).
func Path(uri string) (string, error) {
	if len(uri) < len(Scheme)+1 || !strings.EqualFold(uri[:len(Scheme)+1], Scheme+":") {
		return "", backends.NewURIError(uri, `not a file: URI`)
	}
	p := uri[len(Scheme)+1:]
	if rest, ok := strings.CutPrefix(p, "//"); ok {
		// RFC 8089: file://host/path; only an empty host means this machine.
		if !strings.HasPrefix(rest, "/") {
			return "", backends.NewURIError(uri, "file URIs with a host are not supported (use file:///abs/path or file:rel/path)")
		}
		p = rest
	}
	if p == "" {
		return "", backends.NewURIError(uri, "empty path")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", backends.NewURIError(uri, "path contains a NUL byte")
	}
	return p, nil
}

// InsecureModeError reports a key file that group or others may access.
type InsecureModeError struct {
	Path string
	Mode fs.FileMode
}

func (e *InsecureModeError) Error() string {
	return fmt.Sprintf("file: key file %s has mode %#o, which grants access to group or others; run chmod 600 %s",
		e.Path, uint32(e.Mode.Perm()), e.Path)
}

// readKeyFile reads path after checking it is a regular file of at most
// MaxFileSize bytes that only its owner can access. The checks use the open
// descriptor, not the path, so the file cannot be swapped in between.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("file: %w", err) // *PathError names the path
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("file: key file %s is not a regular file", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, &InsecureModeError{Path: path, Mode: st.Mode()}
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("file: key file %s is %d bytes, over the %d-byte limit", path, st.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("file: read %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		clear(data)
		return nil, fmt.Errorf("file: key file %s is over the %d-byte limit", path, MaxFileSize)
	}
	return data, nil
}
