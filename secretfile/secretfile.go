// Package secretfile reads the small files that hold key material, a PIN,
// a password, a certificate or a configuration, named by a caller or an
// operator who may name any path (a key import, a pin-source in a key URI,
// a config file and the files it names). It is the one bounded reader: only
// a regular file is read, never past a cap, so /dev/zero, a FIFO or a huge
// file is refused at once instead of hanging the reader or exhausting memory.
package secretfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// NotRegularError is a path that names something other than a regular file.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is not a regular file (it is a %s)", e.Path, Kind(e.Mode))
}

// TooLargeError is a file over the size its reader accepts.
type TooLargeError struct {
	Path string
	Max  int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is over the %d-byte limit", e.Path, e.Max)
}

// Open opens path for reading without blocking and refuses anything but a
// regular file, judged on the open descriptor so the file cannot be swapped
// in between. A plain open of a FIFO waits for a writer, forever if there is
// none: a caller who may name any path could wedge a thread per call, and a
// daemon's shutdown with them. flags adds open flags (O_NOFOLLOW).
func Open(path string, flags int) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|flags, 0)
	if err != nil {
		return nil, nil, err // *PathError names the path only
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, &NotRegularError{Path: path, Mode: st.Mode()}
	}
	return f, st, nil
}

// ReadAll reads the regular file f (from Open) to its end, at most max
// bytes: a larger file is a *TooLargeError, whatever its size said.
func ReadAll(f *os.File, st fs.FileInfo, max int64) ([]byte, error) {
	if st.Size() > max {
		return nil, &TooLargeError{Path: f.Name(), Max: max}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		clear(data)
		return nil, err
	}
	if int64(len(data)) > max {
		clear(data)
		return nil, &TooLargeError{Path: f.Name(), Max: max}
	}
	return data, nil
}

// ReadFile reads the regular file at path, at most max bytes: Open and
// ReadAll in one call. A *NotRegularError or *TooLargeError names the path;
// other errors are *fs.PathError.
func ReadFile(path string, max int64) ([]byte, error) {
	f, st, err := Open(path, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, st, max)
}

// Kind names the type of a file that is not a regular file, for messages.
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	}
	return "special file"
}

// Within returns path with its symbolic links resolved, and true, when that
// lies inside one of dirs (absolute; themselves resolved when they exist).
// A path that does not resolve (a missing file) is judged by its resolved
// parent directory, else as written, so a refusal never tells whether a
// file outside exists.
func Within(path string, dirs []string) (string, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		real = abs
		if dir, derr := filepath.EvalSymlinks(filepath.Dir(abs)); derr == nil {
			real = filepath.Join(dir, filepath.Base(abs))
		}
	}
	for _, d := range dirs {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			d = r
		}
		if rel, err := filepath.Rel(d, real); err == nil && filepath.IsLocal(rel) {
			return real, true
		}
	}
	return "", false
}
