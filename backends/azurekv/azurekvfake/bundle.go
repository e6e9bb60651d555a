package azurekvfake

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/base64"
	"maps"
	"math/big"
	"slices"
)

// keyBundle is Key Vault's KeyBundle, the answer of CreateKey, GetKey and
// UpdateKey (azkeys.KeyBundle).
type keyBundle struct {
	Key        jsonWebKey        `json:"key"`
	Attributes keyAttributes     `json:"attributes"`
	Tags       map[string]string `json:"tags,omitempty"`
}

// jsonWebKey is the public part of a key. Byte fields are base64url
// without padding, which is the only form azcore's Base64URLFormat
// decodes; x and y are as wide as the curve's field, n has no leading
// zeros.
type jsonWebKey struct {
	KID    string   `json:"kid"`
	Kty    string   `json:"kty"`
	KeyOps []string `json:"key_ops"`
	Crv    string   `json:"crv,omitempty"`
	X      string   `json:"x,omitempty"`
	Y      string   `json:"y,omitempty"`
	N      string   `json:"n,omitempty"`
	E      string   `json:"e,omitempty"`
}

// keyAttributes are times in Unix seconds, as Key Vault sends them; the
// recovery settings are those of a vault with soft delete (the default).
type keyAttributes struct {
	Enabled         bool   `json:"enabled"`
	Created         int64  `json:"created"`
	Updated         int64  `json:"updated"`
	RecoveryLevel   string `json:"recoveryLevel"`
	RecoverableDays int    `json:"recoverableDays"`
	Exportable      bool   `json:"exportable"`
}

// bundleLocked renders v, a version of k. The caller holds store.mu.
func (s *store) bundleLocked(k *key, v *version) keyBundle {
	jwk := jsonWebKey{KID: s.kid(k, v), Kty: v.spec.kty, KeyOps: slices.Clone(v.ops)}
	switch pub := v.signer.Public().(type) {
	case *ecdsa.PublicKey:
		// 0x04 ‖ x ‖ y, each as wide as the field. Bytes cannot fail for a
		// key of a NIST curve made by ecdsa.GenerateKey.
		point, _ := pub.Bytes()
		xy := point[1:]
		jwk.Crv = v.spec.crv
		jwk.X = base64.RawURLEncoding.EncodeToString(xy[:len(xy)/2])
		jwk.Y = base64.RawURLEncoding.EncodeToString(xy[len(xy)/2:])
	case *rsa.PublicKey:
		jwk.N = base64.RawURLEncoding.EncodeToString(pub.N.Bytes())
		jwk.E = base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes())
	}
	return keyBundle{
		Key: jwk,
		Attributes: keyAttributes{
			Enabled:         v.enabled,
			Created:         v.created.Unix(),
			Updated:         v.updated.Unix(),
			RecoveryLevel:   "Recoverable+Purgeable",
			RecoverableDays: 90,
		},
		Tags: maps.Clone(v.tags),
	}
}
