//go:build !noawskms

package awskms

import (
	"testing"

	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/backends/backendtest"
	"github.com/cardsign/cardsign/jose"
)

// TestContract runs the backend contract against the fake, through the
// real AWS SDK client.
func TestContract(t *testing.T) {
	e := newEnv(t, Config{KeySpec: "ECC_NIST_P256"}, awskmsfake.Options{})
	specOf := map[jose.Alg]string{
		jose.ES256: "ECC_NIST_P256", jose.ES384: "ECC_NIST_P384", jose.ES512: "ECC_NIST_P521",
		jose.RS256: "RSA_2048", jose.PS256: "RSA_2048", jose.EdDSA: "ECC_NIST_EDWARDS25519",
	}
	backendtest.Run(t, backendtest.Env{
		Backend: e.b,
		Algs:    []jose.Alg{jose.ES256, jose.ES384, jose.ES512, jose.RS256, jose.PS256, jose.EdDSA},
		MakeKey: func(t *testing.T, alg jose.Alg) string {
			uri := Scheme + ":///" + e.createKey(t, specOf[alg])
			if alg == jose.PS256 {
				uri += "?alg=PS256"
			}
			return uri
		},
		Missing:    Scheme + ":///arn:aws:kms:" + awskmsfake.DefaultRegion + ":111122223333:key/00000000-0000-4000-8000-000000000000",
		CreateAlgs: []jose.Alg{jose.ES256},
		DisableAtProvider: func(t *testing.T, uri string) {
			ref, err := parseURI(uri)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.fake.DisableKey(ref.id); err != nil {
				t.Fatal(err)
			}
		},
		Secrets: []string{testAccessKey, testSecretKey},
	})
}
