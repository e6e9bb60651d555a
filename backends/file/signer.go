package file

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// keySigner is a file key's signer. It remembers which file it came from,
// so that Healthy can tell when that file is gone or replaced: the key in
// memory keeps signing, but a restart would not find it.
type keySigner struct {
	crypto.Signer
	path   string      // the path opened (resolved, for a restricted backend)
	opened fs.FileInfo // from the descriptor the key was read from
}

// Sign refuses what crypto's own keys would get wrong quietly or panic on
// (nil options; a digest shorter or longer than its hash, which ECDSA
// truncates), then signs with the key in memory.
func (s *keySigner) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if opts == nil {
		return nil, fmt.Errorf("file: sign with %s: nil crypto.SignerOpts", s.path)
	}
	if h := opts.HashFunc(); h != 0 && len(digest) != h.Size() {
		return nil, fmt.Errorf("file: sign with %s: the %v digest is %d bytes, want %d", s.path, h, len(digest), h.Size())
	}
	return s.Signer.Sign(rand, digest, opts)
}

// Healthy reports whether the key file still holds this key. It stats the
// file and re-reads it only when it is not the same unchanged file, so a
// readiness check every few seconds costs one stat.
func (s *keySigner) Healthy(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("file: %w", err)
	}
	st, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file: key file %s is gone (deleted or moved): the key signs from memory until a restart, then cannot be opened; restore the file, or rotate to a new key", s.path)
	}
	if err != nil {
		return fmt.Errorf("file: key file %s: %w", s.path, err)
	}
	if os.SameFile(st, s.opened) && st.Size() == s.opened.Size() && st.ModTime().Equal(s.opened.ModTime()) && st.Mode() == s.opened.Mode() {
		return nil
	}
	data, _, err := readKeyFile(s.path, 0)
	if err != nil {
		return fmt.Errorf("file: key file %s changed and can no longer be read: %w", s.path, err)
	}
	defer clear(data)
	h, err := parseKey(s.path, data)
	if err != nil {
		return fmt.Errorf("file: key file %s changed and no longer holds a usable key: %w", s.path, err)
	}
	if pub, ok := h.Signer.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(s.Public()) {
		return fmt.Errorf("file: key file %s now holds a different key than the one in use: restore the original file, or rotate to a new key", s.path)
	}
	return nil
}
