//go:build cgo && !nopkcs11

package swtpmtest

import (
	"fmt"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/backendtest"
	"github.com/cardsign/cardsign/backends/pkcs11"
	"github.com/cardsign/cardsign/jose"
)

// TestContract runs the backend contract against keys generated inside a
// TPM (swtpm, through tpm2-abrmd and libtpm2-pkcs11) by the pkcs11
// backend: the algs the TPM signs (TestBackendKeysInTPM says why the
// others cannot).
func TestContract(t *testing.T) {
	tpm := Start(t)
	tpm.Setenv(t)
	reg := newRegistry(t, tpm, &syncBuffer{})
	b, err := reg.Backend(t.Context(), pkcs11.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	backendtest.Run(t, backendtest.Env{
		Backend: b,
		Algs:    []jose.Alg{jose.ES256, jose.ES384, jose.PS256},
		MakeKey: func(t *testing.T, alg jose.Alg) string {
			n++
			uri, err := b.(backends.Creator).Create(t.Context(), backends.CreateRequest{Alg: alg, Name: fmt.Sprintf("contract-%d", n)})
			if err != nil {
				t.Fatalf("Create %s in the TPM: %v", alg, err)
			}
			return uri
		},
		Missing:    "pkcs11:token=" + tpm.Token + ";object=absent-key",
		CreateAlgs: []jose.Alg{jose.ES256},
		Secrets:    []string{tpm.PIN, tpm.SOPIN},
	})
}
