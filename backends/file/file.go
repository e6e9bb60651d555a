package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/secretfile"
)

// Scheme is the URI scheme this backend registers.
const Scheme = "file"

// MaxFileSize caps a key file. The largest supported key (RSA 4096 as a JWK)
// is about 4 KiB; anything much bigger is not a key file.
const MaxFileSize = 64 << 10

// Constructor builds a file backend for a backends.Registry from a Config
// (nil settings: unrestricted, the CLI's backend in its user's own process).
func Constructor(ctx context.Context, cfg backends.Config) (backends.Backend, error) {
	return backends.Construct(ctx, Scheme, cfg, func(_ context.Context, c Config) (Backend, error) { return New(c) })
}

// Backend opens and creates keys in local files. The zero value is ready
// and reads any file the process can; New restricts it to directories.
type Backend struct {
	dirs []string // allowed directories, cleaned; empty: anywhere
}

var (
	_ backends.Backend = Backend{}
	_ backends.Creator = Backend{}
)

// Open reads the private key at the path of a file: URI. A JWK's "alg" and
// "kid" members are passed on in the Handle; PEM keys have neither.
//
// The Handle's signer also has a Healthy method, which reports a key file
// that is gone or now holds another key: the key keeps signing from memory,
// but readiness should say that a restart would not find it.
func (b Backend) Open(ctx context.Context, uri string) (backends.Handle, error) {
	path, err := Path(uri)
	if err != nil {
		return backends.Handle{}, err
	}
	if err := ctx.Err(); err != nil {
		return backends.Handle{}, fmt.Errorf("file: %w", err)
	}
	// A restricted backend opens the resolved path it checked, and refuses
	// a symbolic link put in its place since.
	open, flags := path, 0
	if len(b.dirs) > 0 {
		if open, err = b.resolve(path); err != nil {
			return backends.Handle{}, err
		}
		flags = syscall.O_NOFOLLOW
	}
	data, st, err := readKeyFile(open, flags)
	if err != nil {
		if open != path {
			err = fmt.Errorf("%w (key file %s)", err, path)
		}
		if errors.Is(err, fs.ErrNotExist) {
			err = &KeyNotFoundError{Path: path, Err: err}
		}
		return backends.Handle{}, err
	}
	defer clear(data) // best effort: fewer copies of the key in memory
	h, err := parseKey(path, data)
	if err != nil {
		return backends.Handle{}, err
	}
	h.Signer = &keySigner{Signer: h.Signer, path: open, opened: st}
	return h, nil
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
//
// The open is non-blocking: opening a FIFO for reading otherwise waits for
// a writer, forever if there is none, and a caller who may name any path
// (an import) could wedge a daemon thread per call and its shutdown. With
// O_NONBLOCK the open returns at once, and fstat refuses the FIFO before
// anything is read.
//
// It returns the file's FileInfo from the descriptor too, to tell later
// whether the path still names the same file.
func readKeyFile(path string, flags int) ([]byte, fs.FileInfo, error) {
	f, st, err := secretfile.Open(path, flags)
	var nr *secretfile.NotRegularError
	switch {
	case errors.As(err, &nr):
		return nil, nil, fmt.Errorf("file: key file %s is not a regular file (it is a %s); give the path of a key file", path, secretfile.Kind(nr.Mode))
	case err != nil:
		return nil, nil, fmt.Errorf("file: %w", err) // *PathError names the path
	}
	defer f.Close()
	if st.Mode().Perm()&0o077 != 0 {
		return nil, nil, &InsecureModeError{Path: path, Mode: st.Mode()}
	}
	data, err := secretfile.ReadAll(f, st, MaxFileSize)
	var tl *secretfile.TooLargeError
	switch {
	case errors.As(err, &tl):
		return nil, nil, fmt.Errorf("file: key file %s is over the %d-byte limit; a key file holds one key", path, MaxFileSize)
	case err != nil:
		return nil, nil, fmt.Errorf("file: read %s: %w", path, err)
	}
	return data, st, nil
}
