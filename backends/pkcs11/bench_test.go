//go:build cgo && !nopkcs11

package pkcs11

import (
	"crypto"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/ThalesGroup/crypto11"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	p11 "github.com/miekg/pkcs11"
	pkcs11uri "github.com/stefanberger/go-pkcs11uri"
)

// BenchmarkES256 measures P-256 signatures on SoftHSM2 through the backend
// (crypto.Signer, and jose.Sign which also verifies) against crypto11 signing
// with the same key in the same process, at 1 and 8 goroutines. Reported as
// sig/s; the crypto11 figure is the in-process reference for docs/benchmarks.md.
//
//	go test -run '^$' -bench ES256 ./backends/pkcs11/
func BenchmarkES256(b *testing.B) {
	// crypto11 refuses a library someone else initialized, so it goes
	// first; make sure no earlier test left the library initialized.
	if c := p11.New(env.module); c != nil {
		_ = c.Finalize()
		c.Destroy()
	}
	c11, err := crypto11.Configure(&crypto11.Config{
		Path: env.module, TokenLabel: env.main.label, Pin: env.main.pin,
		MaxSessions: DefaultPoolSize + 1, // + its own persistent session, as our anchor
	})
	if err != nil {
		b.Fatalf("crypto11.Configure: %v", err)
	}
	defer c11.Close()

	backend, _ := newBackend(b, Config{Token: env.main.label, PIN: env.main.pin})
	uri, h := newES256Key(b, backend, uniq("bench"))
	u := pkcs11uri.New()
	if err := u.Parse(uri); err != nil {
		b.Fatal(err)
	}
	id, _ := u.GetPathAttribute("id", false)
	ref, err := c11.FindKeyPair([]byte(id), nil)
	if err != nil || ref == nil {
		b.Fatalf("crypto11.FindKeyPair: %v", err)
	}

	digest := sha256.Sum256([]byte("eyJhbGciOiJFUzI1NiJ9.e30"))
	input := []byte("eyJhbGciOiJFUzI1NiJ9.e30")
	for _, p := range []int{1, 8} {
		b.Run(fmt.Sprintf("backend/p=%d", p), func(b *testing.B) {
			testsupport.Parallel(b, p, func() error { _, err := h.Signer.Sign(nil, digest[:], crypto.SHA256); return err })
		})
		b.Run(fmt.Sprintf("crypto11/p=%d", p), func(b *testing.B) {
			testsupport.Parallel(b, p, func() error { _, err := ref.Sign(nil, digest[:], crypto.SHA256); return err })
		})
		b.Run(fmt.Sprintf("backend+jose.Sign/p=%d", p), func(b *testing.B) {
			testsupport.Parallel(b, p, func() error { _, err := jose.Sign(b.Context(), h.Signer, jose.ES256, input); return err })
		})
	}
}
