//go:build !nogcpkms

package gcpkms

import (
	"testing"

	"cloud.google.com/go/kms/apiv1/kmspb"

	"github.com/cardsign/cardsign/backends/backendtest"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/jose"
)

// TestContract runs the backend contract against the fake, through the
// real Cloud KMS client.
func TestContract(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	algOf := map[jose.Alg]kmspb.CryptoKeyVersion_CryptoKeyVersionAlgorithm{
		jose.ES256: kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256,
		jose.ES384: kmspb.CryptoKeyVersion_EC_SIGN_P384_SHA384,
		jose.RS256: kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_2048_SHA256,
		jose.PS256: kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256,
		jose.EdDSA: kmspb.CryptoKeyVersion_EC_SIGN_ED25519,
	}
	cryptoKey, _ := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	b, _ := newBackend(t, f, Config{CryptoKey: cryptoKey})
	backendtest.Run(t, backendtest.Env{
		Backend: b,
		Algs:    []jose.Alg{jose.ES256, jose.ES384, jose.RS256, jose.PS256, jose.EdDSA},
		MakeKey: func(t *testing.T, alg jose.Alg) string {
			_, uri := addKey(t, f, algOf[alg])
			return uri
		},
		Missing:    Scheme + "://" + keyRing + "/cryptoKeys/absent/cryptoKeyVersions/1",
		CreateAlgs: []jose.Alg{jose.ES256},
		DisableAtProvider: func(t *testing.T, uri string) {
			if err := f.SetState(nameOf(uri), kmspb.CryptoKeyVersion_DISABLED); err != nil {
				t.Fatal(err)
			}
		},
	})
}
