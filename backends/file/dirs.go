package file

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/secretfile"
)

// Config restricts a Backend. The zero Config restricts nothing: that is
// the CLI's backend, in the user's own process, reading the user's files.
type Config struct {
	// AllowedDirs are absolute directories key files must be in, after
	// symbolic links are resolved. Empty: any file the process can read.
	// A daemon sets it: otherwise anyone allowed to import a key could
	// make it open any file it can read.
	AllowedDirs []string
}

// New returns a Backend restricted by cfg. The directories need not exist
// yet; they are resolved each time a path is checked, so a directory
// created or moved later is followed.
func New(cfg Config) (Backend, error) {
	dirs := make([]string, 0, len(cfg.AllowedDirs))
	for _, d := range cfg.AllowedDirs {
		if !filepath.IsAbs(d) {
			return Backend{}, fmt.Errorf("file: allowed directory %q is not an absolute path", d)
		}
		dirs = append(dirs, filepath.Clean(d))
	}
	return Backend{dirs: dirs}, nil
}

// DirNotAllowedError reports a key file outside the allowed directories.
// The file was not opened: the error says nothing about whether it exists
// or what it holds.
type DirNotAllowedError struct {
	Path    string // as given
	Allowed []string
}

func (e *DirNotAllowedError) Error() string {
	return fmt.Sprintf("file: key file %s is outside the allowed directories (%s); move the key (mode 0600) into one of them, or allow its directory",
		e.Path, strings.Join(e.Allowed, ", "))
}

// CheckURI reports whether b may open the file a file: URI names: nil when
// b is unrestricted or the file, with symbolic links resolved, is inside an
// allowed directory. It does not open the file.
func (b Backend) CheckURI(uri string) error {
	path, err := Path(uri)
	if err != nil {
		return err
	}
	_, err = b.resolve(path)
	return err
}

// resolve returns the path to open for path: path itself when b is
// unrestricted, else path with every symbolic link resolved, after checking
// that it is inside an allowed directory. A path that does not resolve (a
// missing file) is judged by its resolved parent directory, else
// lexically, so a refusal never tells whether a file outside exists.
func (b Backend) resolve(path string) (string, error) {
	if len(b.dirs) == 0 {
		return path, nil
	}
	if real, ok := secretfile.Within(path, b.dirs); ok {
		return real, nil
	}
	return "", &DirNotAllowedError{Path: path, Allowed: b.dirs}
}

// createError turns the failure to create a key file into an error that
// says where and what to do: the usual causes are a key directory that is
// missing, not a directory, or not writable by the daemon's user.
func createError(path string, err error) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return fmt.Errorf("file: create key %s: %w", path, err)
	}
	var fix string
	switch {
	case errors.Is(err, fs.ErrPermission):
		fix = "make the directory writable by the daemon's user"
	case errors.Is(err, fs.ErrNotExist):
		fix = "create the directory (owned by the daemon's user, mode 0700)"
	case errors.Is(err, syscall.ENOTDIR):
		fix = "a component of the key directory's path is a file: point keys.dir at a directory"
	case errors.Is(err, syscall.EROFS):
		fix = "the key directory is on a read-only file system: use a writable one"
	default:
		return fmt.Errorf("file: create key %s: %w", path, err)
	}
	return &backends.PreconditionError{Op: "file backend: create key in " + filepath.Dir(path), Err: pe.Err, Fix: fix}
}
