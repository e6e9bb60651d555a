package file

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/backendtest"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

// TestContract runs the backend contract against PKCS#8 key files.
func TestContract(t *testing.T) {
	dir := t.TempDir()
	b, err := Constructor(t.Context(), backends.Config{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	backendtest.Run(t, backendtest.Env{
		Backend: b,
		Algs:    []jose.Alg{jose.ES256, jose.ES384, jose.ES512, jose.RS256, jose.EdDSA},
		MakeKey: func(t *testing.T, alg jose.Alg) string {
			n++
			p := writeKey(t, dir, fmt.Sprintf("k%d.pem", n), pkcs8(t, testsupport.Key(t, alg)), 0o600)
			return "file:" + p
		},
		Missing:    "file:" + filepath.Join(dir, "absent.pem"),
		CreateAlgs: []jose.Alg{jose.ES256, jose.EdDSA},
		CreateName: func(int) string {
			n++
			return filepath.Join(dir, fmt.Sprintf("created%d.pem", n))
		},
	})
}
