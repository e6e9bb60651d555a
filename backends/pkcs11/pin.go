//go:build cgo && !nopkcs11

package pkcs11

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/secretfile"
)

// maxPINFile caps a pin-source file. PKCS#11 PINs are short (SoftHSM allows
// 255 bytes); a bigger file is the wrong file, and reading it whole could
// put something else into the PIN.
const maxPINFile = 1 << 10

// readPINSource reads the PIN named by an RFC 7512 pin-source: an absolute
// path or a file: URI, inside one of dirs (after symbolic links are
// resolved). One trailing newline (LF or CRLF) is dropped, because
// `echo 1234 > pin` and most secret mounts add one; anything else is kept,
// since a PIN may legitimately contain spaces. Errors name the file, never
// its content.
//
// A pin-source comes with a key URI, from whoever may import keys: without
// the directory check it would read any file the daemon can, and whether
// the token then accepts the "PIN" tells the caller whether that file's
// content is the PIN. The file is opened non-blocking and must be a regular
// file, so a FIFO nobody writes to cannot hold the call (and shutdown)
// forever.
//
// go-pkcs11uri's GetPIN reads the file too, but without a size limit and
// without dropping the newline, which the token would then reject as part of
// the PIN.
func readPINSource(src string, dirs []string) (string, error) {
	path, err := pinSourcePath(src)
	if err != nil {
		return "", err
	}
	real, err := pinSourceAllowed(path, dirs)
	if err != nil {
		return "", err
	}
	f, st, err := secretfile.Open(real, syscall.O_NOFOLLOW)
	var nr *secretfile.NotRegularError
	switch {
	case errors.As(err, &nr):
		return "", fmt.Errorf("pin-source %s is not a regular file; name a file holding the PIN", path)
	case err != nil:
		return "", fmt.Errorf("pin-source: %w", err) // *PathError names the path only
	}
	defer f.Close()
	data, err := secretfile.ReadAll(f, st, maxPINFile)
	var tl *secretfile.TooLargeError
	switch {
	case errors.As(err, &tl):
		return "", fmt.Errorf("pin-source %s is over %d bytes; it does not look like a PIN file", path, maxPINFile)
	case err != nil:
		return "", fmt.Errorf("pin-source %s: %w", path, err)
	}
	defer clear(data)
	pin := string(data)
	if p, ok := strings.CutSuffix(pin, "\n"); ok {
		pin = strings.TrimSuffix(p, "\r")
	}
	if pin == "" {
		return "", fmt.Errorf("pin-source %s is empty", path)
	}
	return pin, nil
}

// PINSourceNotAllowedError reports a pin-source outside
// Config.PINSourceDirs. The file was not opened.
type PINSourceNotAllowedError struct {
	Path    string
	Allowed []string
}

func (e *PINSourceNotAllowedError) Error() string {
	return fmt.Sprintf("pin-source %s is outside the allowed pin-source directories (allowed: %s); put the PIN file in one of them, or add its directory to pkcs11.pin_source_dirs",
		e.Path, backends.JoinOrNone(e.Allowed))
}

// pinSourcePath is the absolute file path a pin-source names (a path or a
// file: URI).
func pinSourcePath(src string) (string, error) {
	u, err := url.Parse(src)
	if err != nil {
		return "", errors.New("pin-source is not a valid URI or path")
	}
	if u.Scheme != "" && u.Scheme != "file" {
		return "", fmt.Errorf("pin-source scheme %q is not supported (want a file path or file: URI)", u.Scheme)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", errors.New("pin-source file: URIs with a host are not supported")
	}
	if !filepath.IsAbs(u.Path) {
		return "", fmt.Errorf("pin-source path %q is not absolute", u.Path)
	}
	return u.Path, nil
}

// CheckURI reports whether Open would accept the pin-source of a key URI
// under b's pin-source directories, without reading the file. cardsignd
// runs it over the keys on record at start, so a key whose PIN file lies
// outside pkcs11.pin_source_dirs stops the start naming the key, rather
// than failing at its first signature.
func (b *Backend) CheckURI(uri string) error {
	k, err := parseURI(uri)
	if err != nil || k.hasPIN || k.pinSource == "" {
		return err
	}
	path, err := pinSourcePath(k.pinSource)
	if err != nil {
		return uriError(uri, err.Error())
	}
	_, err = pinSourceAllowed(path, b.cfg.PINSourceDirs)
	return err
}

// pinSourceAllowed returns path with its symbolic links resolved when that
// is inside one of dirs (themselves resolved). A path that does not
// resolve is judged by its resolved parent, else as written, so a refusal
// never tells whether a file outside exists.
func pinSourceAllowed(path string, dirs []string) (string, error) {
	if real, ok := secretfile.Within(path, dirs); ok {
		return real, nil
	}
	return "", &PINSourceNotAllowedError{Path: path, Allowed: dirs}
}
