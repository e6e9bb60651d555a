//go:build !nogcpkms

package gcpkms

import (
	"errors"
	"testing"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/jose"
)

// TestDisable disables a version (on_revoke: disable): the fake records it,
// the open signer can no longer sign, and Disable is idempotent.
func TestDisable(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	_, uri := addKey(t, f, kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256)
	h, err := b.Open(t.Context(), uri)
	if err != nil {
		t.Fatal(err)
	}
	f.Update(func(o *gcpkmsfake.Options) { o.Unavailable = 1 }) // retried like everything else
	if err := b.Disable(t.Context(), uri); err != nil {
		t.Fatalf("Disable: %v", err)
	}
	if !f.Disabled(nameOf(uri)) {
		t.Fatal("the fake does not record the version as disabled")
	}
	if _, err := jose.Sign(t.Context(), h.Signer, h.Alg, []byte("e30.e30")); !errors.As(err, new(*KeyStateError)) {
		t.Errorf("sign with a disabled version: %v", err)
	}
	if _, err := b.Open(t.Context(), uri); !errors.As(err, new(*KeyStateError)) {
		t.Errorf("open a disabled version: %v", err)
	}
	if err := b.Disable(t.Context(), uri); err != nil {
		t.Errorf("Disable again: %v", err)
	}
}

// TestDisableStates: versions that cannot sign anyway are left alone;
// missing versions and bad URIs are errors.
func TestDisableStates(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	for _, st := range []gcpkmsfake.State{kmspb.CryptoKeyVersion_DESTROYED, kmspb.CryptoKeyVersion_DESTROY_SCHEDULED} {
		_, uri := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
		f.SetState(nameOf(uri), st)
		if err := b.Disable(t.Context(), uri); err != nil {
			t.Errorf("Disable a %v version: %v", st, err)
		}
		if got, _ := f.State(nameOf(uri)); got != st {
			t.Errorf("state %v became %v", st, got)
		}
	}
	_, uri := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	f.SetState(nameOf(uri), kmspb.CryptoKeyVersion_PENDING_GENERATION)
	var ks *KeyStateError
	if err := b.Disable(t.Context(), uri); !errors.As(err, &ks) || ks.State != "PENDING_GENERATION" {
		t.Errorf("Disable a pending version: %v", err)
	}
	if err := b.Disable(t.Context(), uri[:len(uri)-1]+"9"); !errors.As(err, new(*KeyNotFoundError)) {
		t.Errorf("Disable a missing version: %v", err)
	}
	if err := b.Disable(t.Context(), "gcpkms://x"); !errors.As(err, new(*backends.URIError)) {
		t.Errorf("Disable a bad URI: %v", err)
	}
}
