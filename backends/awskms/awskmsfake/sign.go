package awskmsfake

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"strings"

	// Linked in for crypto.Hash.New.
	_ "crypto/sha256"
	_ "crypto/sha512"
)

// maxMessage is KMS's limit on Sign's Message.
const maxMessage = 4096

// algHash returns the hash a signing algorithm uses.
func algHash(alg string) crypto.Hash {
	switch {
	case strings.HasSuffix(alg, "_SHA_256"):
		return crypto.SHA256
	case strings.HasSuffix(alg, "_SHA_384"):
		return crypto.SHA384
	case strings.HasSuffix(alg, "_SHA_512"):
		return crypto.SHA512
	}
	return 0
}

// signMessage signs as KMS does: msgType RAW (the default) hashes msg with
// the algorithm's hash first (except for pure Ed25519, which signs msg),
// DIGEST takes msg as the digest. ECDSA signatures are DER; RSA-PSS uses a
// salt as long as the hash.
func signMessage(signer crypto.Signer, alg, msgType string, msg []byte) ([]byte, *apiError) {
	if msgType == "" {
		msgType = "RAW"
	}
	if len(msg) > maxMessage {
		return nil, validation("1 validation error detected: Value at 'message' failed to satisfy constraint: Member must have length less than or equal to %d", maxMessage)
	}
	h := algHash(alg)
	if alg == "ED25519_SHA_512" {
		if msgType != "RAW" {
			return nil, validation("ED25519_SHA_512 requires MessageType RAW")
		}
		return ed25519.Sign(signer.(ed25519.PrivateKey), msg), nil
	}
	if alg == "ED25519_PH_SHA_512" {
		return nil, errorf("UnsupportedOperationException", "ED25519_PH_SHA_512 is not implemented by this fake")
	}
	var digest []byte
	switch msgType {
	case "RAW":
		hh := h.New()
		hh.Write(msg)
		digest = hh.Sum(nil)
	case "DIGEST":
		if len(msg) != h.Size() {
			return nil, validation("Digest is invalid length for algorithm %s.", alg)
		}
		digest = msg
	default:
		return nil, validation("MessageType %q is not supported for %s", msgType, alg)
	}
	var (
		sig []byte
		err error
	)
	switch {
	case strings.HasPrefix(alg, "ECDSA_"):
		sig, err = ecdsa.SignASN1(rand.Reader, signer.(*ecdsa.PrivateKey), digest)
	case strings.HasPrefix(alg, "RSASSA_PKCS1_V1_5_"):
		sig, err = rsa.SignPKCS1v15(rand.Reader, signer.(*rsa.PrivateKey), h, digest)
	case strings.HasPrefix(alg, "RSASSA_PSS_"):
		sig, err = rsa.SignPSS(rand.Reader, signer.(*rsa.PrivateKey), h, digest, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	default:
		return nil, errorf("UnsupportedOperationException", "signing algorithm %s is not implemented by this fake", alg)
	}
	if err != nil {
		return nil, errorf("KMSInternalException", "signing failed")
	}
	return sig, nil
}
