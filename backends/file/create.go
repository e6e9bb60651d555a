package file

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// RSABits is the modulus size of generated RSA keys: 3072 bits is the
// NIST SP 800-57 size for security beyond 2030.
const RSABits = 3072

// Create generates a key for req.Alg and writes it to the path req.Name
// (a plain path or a file: URI), never overwriting an existing file. It
// returns the new key's URI, "file:" + path.
func (b Backend) Create(ctx context.Context, req backends.CreateRequest) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("file: create: %w", err)
	}
	path := req.Name
	if len(path) > len(Scheme) && strings.EqualFold(path[:len(Scheme)+1], Scheme+":") {
		var err error
		if path, err = Path(path); err != nil {
			return "", err
		}
	}
	if path == "" {
		return "", errors.New("file: create: empty path (CreateRequest.Name)")
	}
	if _, err := b.resolve(path); err != nil {
		return "", err
	}
	// Fail before the (slow, for RSA) key generation when the file exists.
	if _, err := os.Lstat(path); err == nil {
		return "", fmt.Errorf("file: create %s: %w; refusing to overwrite a key", path, ErrExist)
	}
	key, err := Generate(req.Alg)
	if err != nil {
		return "", err
	}
	if err := Write(path, key, req.Alg); err != nil {
		return "", err
	}
	return Scheme + ":" + path, nil
}

// Generate makes a new private key for alg: P-256, P-384 or P-521 for ES*,
// Ed25519 for EdDSA, RSA RSABits for RS256 and PS256.
func Generate(alg jose.Alg) (crypto.Signer, error) {
	if alg == "" {
		return nil, errors.New("file: generate: no alg given")
	}
	if err := checkAlg(alg); err != nil {
		return nil, fmt.Errorf("file: generate: %w", err)
	}
	k, err := jose.GenerateKey(alg, RSABits)
	if err != nil {
		return nil, fmt.Errorf("file: %w", err)
	}
	return k, nil
}

// Write stores key at path for signing with alg ("" means jose.DefaultAlg of
// the key). It writes PEM PKCS#8 when the key type alone implies alg, and
// otherwise (PS256) a private JWK carrying "alg", so that reopening the file
// gives back the same alg. The file is created with O_EXCL and mode 0600 and
// synced to disk; an existing file is never touched.
func Write(path string, key crypto.Signer, alg jose.Alg) error {
	if key == nil {
		return errors.New("file: write: nil key")
	}
	def, err := jose.DefaultAlg(key.Public())
	if err != nil {
		return fmt.Errorf("file: write %s: %w", path, err)
	}
	if alg == "" {
		alg = def
	}
	if err := jose.CheckKey(alg, key.Public()); err != nil {
		return fmt.Errorf("file: write %s: %w", path, err)
	}
	var data []byte
	if alg == def {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return fmt.Errorf("file: write %s: %w", path, err)
		}
		data = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		clear(der)
	} else {
		if data, err = jose.MarshalPrivateJWK(key, "", alg); err != nil {
			return fmt.Errorf("file: write %s: %w", path, err)
		}
		data = append(data, '\n')
	}
	defer clear(data)
	return writeExclusive(path, data)
}

// writeExclusive creates path with mode 0600 (O_EXCL: never an existing
// file, never a symlink target), writes data and fsyncs it and its
// directory. On failure the partial file, which this call created, is
// removed.
func writeExclusive(path string, data []byte) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("file: write %s: %w; refusing to overwrite a key", path, ErrExist)
		}
		return createError(path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(path)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("file: write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("file: sync %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("file: close %s: %w", path, err)
	}
	// Make the new directory entry durable too. Best effort: some file
	// systems cannot sync a directory, and the key itself is already safe.
	if d, derr := os.Open(filepath.Dir(path)); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// ErrExist is wrapped by Create and Write when the key file already exists.
var ErrExist = errors.New("key file already exists")

// checkAlg reports whether alg names a supported alg; "" is allowed and
// means "the key type decides".
func checkAlg(alg jose.Alg) error {
	if alg == "" {
		return nil
	}
	_, err := jose.ParseAlg(string(alg))
	return err
}
