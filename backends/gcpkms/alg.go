//go:build !nogcpkms

package gcpkms

import (
	"crypto"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/cardsign/cardsign/jose"
)

// algorithm is what the backend needs to know of a CryptoKeyVersion
// algorithm it can sign with.
type algorithm struct {
	jose    jose.Alg
	hash    crypto.Hash // the digest Cloud KMS takes; 0: it takes the data (Ed25519)
	pss     bool        // RSA-PSS (salt length = digest length)
	rsaBits int         // the modulus size the algorithm promises; 0 for EC
}

// algorithmOf maps a Cloud KMS algorithm to its JOSE alg. Algorithms JOSE
// has no alg for (secp256k1, SHA-512 RSA, ML-DSA, ...) and those that do not
// sign are not supported.
func algorithmOf(a kmspb.CryptoKeyVersion_CryptoKeyVersionAlgorithm) (algorithm, bool) {
	switch a {
	case kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256:
		return algorithm{jose: jose.ES256, hash: crypto.SHA256}, true
	case kmspb.CryptoKeyVersion_EC_SIGN_P384_SHA384:
		return algorithm{jose: jose.ES384, hash: crypto.SHA384}, true
	case kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_2048_SHA256:
		return algorithm{jose: jose.RS256, hash: crypto.SHA256, rsaBits: 2048}, true
	case kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_3072_SHA256:
		return algorithm{jose: jose.RS256, hash: crypto.SHA256, rsaBits: 3072}, true
	case kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_4096_SHA256:
		return algorithm{jose: jose.RS256, hash: crypto.SHA256, rsaBits: 4096}, true
	case kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256:
		return algorithm{jose: jose.PS256, hash: crypto.SHA256, pss: true, rsaBits: 2048}, true
	case kmspb.CryptoKeyVersion_RSA_SIGN_PSS_3072_SHA256:
		return algorithm{jose: jose.PS256, hash: crypto.SHA256, pss: true, rsaBits: 3072}, true
	case kmspb.CryptoKeyVersion_RSA_SIGN_PSS_4096_SHA256:
		return algorithm{jose: jose.PS256, hash: crypto.SHA256, pss: true, rsaBits: 4096}, true
	case kmspb.CryptoKeyVersion_EC_SIGN_ED25519:
		return algorithm{jose: jose.EdDSA}, true
	}
	return algorithm{}, false
}

// kmsDigest wraps d in the Digest message for hash h.
func kmsDigest(h crypto.Hash, d []byte) *kmspb.Digest {
	switch h {
	case crypto.SHA384:
		return &kmspb.Digest{Digest: &kmspb.Digest_Sha384{Sha384: d}}
	case crypto.SHA512:
		return &kmspb.Digest{Digest: &kmspb.Digest_Sha512{Sha512: d}}
	}
	return &kmspb.Digest{Digest: &kmspb.Digest_Sha256{Sha256: d}}
}
