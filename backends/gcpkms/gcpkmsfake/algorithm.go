package gcpkmsfake

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"strings"

	"cloud.google.com/go/kms/apiv1/kmspb"
)

// Algorithm is a CryptoKeyVersion algorithm, such as
// kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256.
type Algorithm = kmspb.CryptoKeyVersion_CryptoKeyVersionAlgorithm

type keyKind int

const (
	kindNone keyKind = iota // not implemented here: no key material
	kindEC
	kindRSAPKCS1
	kindRSAPSS
	kindEd25519
)

// algSpec is how the fake makes and uses keys of one algorithm.
type algSpec struct {
	kind  keyKind
	curve elliptic.Curve
	bits  int
	hash  crypto.Hash // 0 for Ed25519, which signs the data itself
}

// specOf returns how to implement alg; kind is kindNone for algorithms the
// fake knows only by name (secp256k1, ML-DSA, symmetric ones): versions of
// them exist, have a state and an algorithm, but cannot sign or give a
// public key.
func specOf(alg Algorithm) algSpec {
	// A table built per call: the fake has no package-level state.
	specs := map[Algorithm]algSpec{
		kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256:        {kind: kindEC, curve: elliptic.P256(), hash: crypto.SHA256},
		kmspb.CryptoKeyVersion_EC_SIGN_P384_SHA384:        {kind: kindEC, curve: elliptic.P384(), hash: crypto.SHA384},
		kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_2048_SHA256: {kind: kindRSAPKCS1, bits: 2048, hash: crypto.SHA256},
		kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_3072_SHA256: {kind: kindRSAPKCS1, bits: 3072, hash: crypto.SHA256},
		kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_4096_SHA256: {kind: kindRSAPKCS1, bits: 4096, hash: crypto.SHA256},
		kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_4096_SHA512: {kind: kindRSAPKCS1, bits: 4096, hash: crypto.SHA512},
		kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256:   {kind: kindRSAPSS, bits: 2048, hash: crypto.SHA256},
		kmspb.CryptoKeyVersion_RSA_SIGN_PSS_3072_SHA256:   {kind: kindRSAPSS, bits: 3072, hash: crypto.SHA256},
		kmspb.CryptoKeyVersion_RSA_SIGN_PSS_4096_SHA256:   {kind: kindRSAPSS, bits: 4096, hash: crypto.SHA256},
		kmspb.CryptoKeyVersion_RSA_SIGN_PSS_4096_SHA512:   {kind: kindRSAPSS, bits: 4096, hash: crypto.SHA512},
		kmspb.CryptoKeyVersion_EC_SIGN_ED25519:            {kind: kindEd25519},
	}
	return specs[alg]
}

// purposeOf is the CryptoKey purpose an algorithm belongs to.
func purposeOf(alg Algorithm) kmspb.CryptoKey_CryptoKeyPurpose {
	switch alg {
	case kmspb.CryptoKeyVersion_GOOGLE_SYMMETRIC_ENCRYPTION:
		return kmspb.CryptoKey_ENCRYPT_DECRYPT
	case kmspb.CryptoKeyVersion_HMAC_SHA256, kmspb.CryptoKeyVersion_HMAC_SHA1,
		kmspb.CryptoKeyVersion_HMAC_SHA384, kmspb.CryptoKeyVersion_HMAC_SHA512, kmspb.CryptoKeyVersion_HMAC_SHA224:
		return kmspb.CryptoKey_MAC
	}
	if strings.HasPrefix(alg.String(), "RSA_DECRYPT_") {
		return kmspb.CryptoKey_ASYMMETRIC_DECRYPT
	}
	return kmspb.CryptoKey_ASYMMETRIC_SIGN
}

// generate makes a private key for spec; nil for kindNone.
func (spec algSpec) generate() (crypto.Signer, error) {
	var (
		k   crypto.Signer
		err error
	)
	switch spec.kind {
	case kindNone:
		return nil, nil
	case kindEC:
		k, err = ecdsa.GenerateKey(spec.curve, rand.Reader)
	case kindRSAPKCS1, kindRSAPSS:
		k, err = rsa.GenerateKey(rand.Reader, spec.bits)
	case kindEd25519:
		_, k, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		return nil, fmt.Errorf("gcpkmsfake: generate key: %w", err)
	}
	return k, nil
}

// signerOpts is what crypto.Signer.Sign takes for spec: Cloud KMS's RSA-PSS
// uses a salt as long as the digest.
func (spec algSpec) signerOpts() crypto.SignerOpts {
	if spec.kind == kindRSAPSS {
		return &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: spec.hash}
	}
	return spec.hash
}
