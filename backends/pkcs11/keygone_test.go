//go:build cgo && !nopkcs11

package pkcs11

import (
	"errors"
	"testing"

	pkcs11uri "github.com/stefanberger/go-pkcs11uri"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// TestKeyDestroyed destroys a key object on the token behind an open
// signer's back: signing, and opening the key again, fail with an error
// matching backends.ErrKeyNotFound (which the daemon maps to NOT_FOUND
// naming the key), not with unavailability.
func TestKeyDestroyed(t *testing.T) {
	b, _ := newBackend(t, Config{PIN: env.main.pin, Token: env.main.label})
	loginTo(t, b, env.main)
	raw := openRaw(t, env.main)
	uri, h := newES256Key(t, b, uniq("destroyed"))
	if _, err := jose.Sign(t.Context(), h.Signer, h.Alg, []byte("e30.e30")); err != nil {
		t.Fatalf("Sign before the key is destroyed: %v", err)
	}
	u := pkcs11uri.New()
	if err := u.Parse(uri); err != nil {
		t.Fatal(err)
	}
	id, _ := u.GetPathAttribute("id", false)
	if err := raw.c.DestroyObject(raw.s, raw.privateKey(t, []byte(id))); err != nil {
		t.Fatalf("C_DestroyObject: %v", err)
	}

	_, err := jose.Sign(t.Context(), h.Signer, h.Alg, []byte("e30.e30"))
	var nf *KeyNotFoundError
	if !errors.Is(err, backends.ErrKeyNotFound) || !errors.As(err, &nf) || errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("Sign after the key was destroyed: %v, want a *KeyNotFoundError matching backends.ErrKeyNotFound", err)
	}
	_, err = b.Open(t.Context(), uri)
	if !errors.Is(err, backends.ErrKeyNotFound) || errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("Open after the key was destroyed: %v, want backends.ErrKeyNotFound", err)
	}
	// Another key on the same token still signs: only this key is gone.
	_, oh := newES256Key(t, b, uniq("survivor"))
	if _, err := jose.Sign(t.Context(), oh.Signer, oh.Alg, []byte("e30.e30")); err != nil {
		t.Errorf("another key after the destruction: %v", err)
	}
}
