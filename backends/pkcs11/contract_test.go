//go:build cgo && !nopkcs11

package pkcs11

import (
	"fmt"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/backendtest"
	"github.com/cardsign/cardsign/jose"
)

// TestContract runs the backend contract against a SoftHSM2 token. Keys are
// made with the backend's own Create (C_GenerateKeyPair in the token).
func TestContract(t *testing.T) {
	b, _ := newBackend(t, Config{PIN: env.main.pin, Token: env.main.label})
	n := 0
	backendtest.Run(t, backendtest.Env{
		Backend: b,
		Algs:    []jose.Alg{jose.ES256, jose.ES384, jose.ES512, jose.RS256, jose.PS256, jose.EdDSA},
		MakeKey: func(t *testing.T, alg jose.Alg) string {
			n++
			uri, err := b.Create(t.Context(), backends.CreateRequest{Alg: alg, Name: uniq(fmt.Sprintf("contract-%d", n))})
			if err != nil {
				t.Fatalf("Create %s: %v", alg, err)
			}
			return uri
		},
		Missing:    "pkcs11:token=" + env.main.label + ";object=absent-key",
		CreateAlgs: []jose.Alg{jose.ES256},
		Secrets:    allPINs(),
	})
}
