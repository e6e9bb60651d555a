package pkcs11

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// maxPINFile caps a pin-source file. PKCS#11 PINs are short (SoftHSM allows
// 255 bytes); a bigger file is the wrong file, and reading it whole could
// put something else into the PIN.
const maxPINFile = 1 << 10

// readPINSource reads the PIN named by an RFC 7512 pin-source: an absolute
// path or a file: URI. One trailing newline (LF or CRLF) is dropped, because
// `echo 1234 > pin` and most secret mounts add one; anything else is kept,
// since a PIN may legitimately contain spaces. Errors name the file, never
// its content.
//
// go-pkcs11uri's GetPIN reads the file too, but without a size limit and
// without dropping the newline, which the token would then reject as part of
// the PIN.
func readPINSource(src string) (string, error) {
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
	path := u.Path
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("pin-source path %q is not absolute", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("pin-source: %w", err) // *PathError names the path only
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPINFile+1))
	if err != nil {
		return "", fmt.Errorf("pin-source %s: %w", path, err)
	}
	defer clear(data)
	if len(data) > maxPINFile {
		return "", fmt.Errorf("pin-source %s is over %d bytes; it does not look like a PIN file", path, maxPINFile)
	}
	pin := string(data)
	if p, ok := strings.CutSuffix(pin, "\n"); ok {
		pin = strings.TrimSuffix(p, "\r")
	}
	if pin == "" {
		return "", fmt.Errorf("pin-source %s is empty", path)
	}
	return pin, nil
}
