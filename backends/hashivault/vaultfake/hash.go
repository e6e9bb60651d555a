package vaultfake

import (
	"crypto"
	_ "crypto/sha1" // registers the hashes Transit names
	_ "crypto/sha256"
	_ "crypto/sha3"
	_ "crypto/sha512"
)

// hashOf returns the hash Transit's hash_algorithm name stands for; "none"
// is crypto.Hash(0), for RSA PKCS#1 v1.5 signatures without a DigestInfo.
func hashOf(name string) (crypto.Hash, bool) {
	switch name {
	case "sha1":
		return crypto.SHA1, true
	case "sha2-224":
		return crypto.SHA224, true
	case "sha2-256":
		return crypto.SHA256, true
	case "sha2-384":
		return crypto.SHA384, true
	case "sha2-512":
		return crypto.SHA512, true
	case "sha3-224":
		return crypto.SHA3_224, true
	case "sha3-256":
		return crypto.SHA3_256, true
	case "sha3-384":
		return crypto.SHA3_384, true
	case "sha3-512":
		return crypto.SHA3_512, true
	case "none":
		return 0, true
	}
	return 0, false
}
