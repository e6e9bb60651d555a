package file

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// parseKey turns the bytes of a key file into a Handle. Every error names the
// file and what is wrong with it, never the bytes.
func parseKey(path string, data []byte) (backends.Handle, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return backends.Handle{}, fmt.Errorf("file: key file %s is empty", path)
	}
	if trimmed[0] == '{' {
		return parseJWK(path, trimmed)
	}
	s, err := parsePEM(path, data)
	if err != nil {
		return backends.Handle{}, err
	}
	return backends.Handle{Signer: s}, nil
}

func parseJWK(path string, data []byte) (backends.Handle, error) {
	priv, err := jose.PrivateMembers(data)
	if err != nil {
		return backends.Handle{}, fmt.Errorf("file: key file %s: %w", path, err)
	}
	if len(priv) == 0 {
		return backends.Handle{}, fmt.Errorf("file: key file %s holds a public JWK only; a private key is needed", path)
	}
	s, pub, err := jose.ParsePrivateJWK(data)
	if err != nil {
		return backends.Handle{}, fmt.Errorf("file: key file %s: %w", path, err)
	}
	// ParsePrivateJWK has checked that "alg" is supported and fits the key.
	return backends.Handle{Signer: s, Alg: jose.Alg(pub.Alg), KID: pub.Kid}, nil
}

// parsePEM reads exactly one unencrypted private key block. Text before the
// first block is tolerated (openssl writes "Bag Attributes" there); a second
// key block, or anything but whitespace after the last block, is refused:
// which of two keys signs should never be a guess.
func parsePEM(path string, data []byte) (crypto.Signer, error) {
	var (
		key  *pem.Block
		rest = data
	)
	for {
		b, r := pem.Decode(rest)
		if b == nil {
			break
		}
		rest = r
		if b.Type == "EC PARAMETERS" { // openssl ecparam -genkey writes it; SEC 1 keys name their curve anyway
			continue
		}
		if key != nil {
			return nil, fmt.Errorf("file: key file %s has more than one PEM block (%q after %q); keep exactly one private key per file", path, b.Type, key.Type)
		}
		key = b
	}
	if key == nil {
		return nil, fmt.Errorf("file: key file %s holds neither a PEM private key nor a JSON private JWK", path)
	}
	defer clear(key.Bytes)
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("file: key file %s has unexpected data after its PEM block", path)
	}
	if key.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(key.Headers["Proc-Type"], "ENCRYPTED") {
		return nil, fmt.Errorf("file: key file %s is encrypted; this backend reads unencrypted keys only (protect the file with mode 0600, or use a PKCS#11 or KMS backend)", path)
	}
	var (
		k   any
		err error
	)
	switch key.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(key.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(key.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(key.Bytes)
	case "PUBLIC KEY", "RSA PUBLIC KEY", "EC PUBLIC KEY", "CERTIFICATE":
		return nil, fmt.Errorf("file: key file %s holds public-only material (PEM %q); a private key is needed", path, key.Type)
	default:
		return nil, fmt.Errorf("file: key file %s has unsupported PEM block %q (want PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY)", path, key.Type)
	}
	if err != nil {
		// x509 errors describe the structure, not its contents.
		return nil, fmt.Errorf("file: key file %s: PEM %q: %w", path, key.Type, err)
	}
	switch s := k.(type) {
	case *ecdsa.PrivateKey, *rsa.PrivateKey, ed25519.PrivateKey:
		return s.(crypto.Signer), nil
	}
	return nil, fmt.Errorf("file: key file %s holds a %T, which cannot sign JWS", path, k)
}
