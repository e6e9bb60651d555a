package vaultfake

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
)

type keyKind int

const (
	kindSymmetric keyKind = iota // known by name only: no key material
	kindECDSA
	kindRSA
	kindEd25519
)

// keyType is a Transit key type and how the fake makes its keys.
type keyType struct {
	name  string
	kind  keyKind
	curve elliptic.Curve
	bits  int
}

// keyTypeOf returns the Transit key type called name. The symmetric types
// exist so that a client can be shown a key that cannot sign; they have no
// key material.
func keyTypeOf(name string) (keyType, bool) {
	switch name {
	case "ecdsa-p256":
		return keyType{name: name, kind: kindECDSA, curve: elliptic.P256()}, true
	case "ecdsa-p384":
		return keyType{name: name, kind: kindECDSA, curve: elliptic.P384()}, true
	case "ecdsa-p521":
		return keyType{name: name, kind: kindECDSA, curve: elliptic.P521()}, true
	case "rsa-2048":
		return keyType{name: name, kind: kindRSA, bits: 2048}, true
	case "rsa-3072":
		return keyType{name: name, kind: kindRSA, bits: 3072}, true
	case "rsa-4096":
		return keyType{name: name, kind: kindRSA, bits: 4096}, true
	case "ed25519":
		return keyType{name: name, kind: kindEd25519}, true
	case "aes128-gcm96", "aes256-gcm96", "chacha20-poly1305":
		return keyType{name: name, kind: kindSymmetric}, true
	}
	return keyType{}, false
}

func (kt keyType) signing() bool    { return kt.kind != kindSymmetric }
func (kt keyType) encryption() bool { return kt.kind == kindSymmetric || kt.kind == kindRSA }
func (kt keyType) derivation() bool { return kt.kind == kindSymmetric || kt.kind == kindEd25519 }

// versionName is the "name" Vault gives each version of an asymmetric key
// in a key's description: the curve, "ed25519", or the RSA type.
func (kt keyType) versionName() string {
	switch kt.kind {
	case kindECDSA:
		return kt.curve.Params().Name
	case kindEd25519:
		return "ed25519"
	}
	return kt.name
}

// generate makes a private key; nil for a symmetric type. It is slow for
// RSA, so callers run it outside their locks.
func (kt keyType) generate() (crypto.Signer, error) {
	var (
		k   crypto.Signer
		err error
	)
	switch kt.kind {
	case kindSymmetric:
		return nil, nil
	case kindECDSA:
		k, err = ecdsa.GenerateKey(kt.curve, rand.Reader)
	case kindRSA:
		k, err = rsa.GenerateKey(rand.Reader, kt.bits)
	case kindEd25519:
		_, k, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		return nil, fmt.Errorf("vaultfake: generate %s key: %w", kt.name, err)
	}
	return k, nil
}

// formatPublic is the public key as Transit shows it: PEM
// SubjectPublicKeyInfo for ECDSA and RSA, the raw 32 bytes in standard
// base64 for Ed25519.
func formatPublic(pub crypto.PublicKey) (string, error) {
	if k, ok := pub.(ed25519.PublicKey); ok {
		return base64.StdEncoding.EncodeToString(k), nil
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("vaultfake: public key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}
