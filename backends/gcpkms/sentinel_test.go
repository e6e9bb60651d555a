//go:build !nogcpkms

package gcpkms

import (
	"errors"
	"strings"
	"testing"

	"cloud.google.com/go/kms/apiv1/kmspb"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/jose"
)

// TestProviderKeySentinels: a key version disabled or destroyed at Cloud
// KMS behind an open signer's back fails signing with an error matching
// backends.ErrKeyDisabled, and a version Cloud KMS does not have fails Open
// with backends.ErrKeyNotFound; neither is unavailability, and both name
// the version.
func TestProviderKeySentinels(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	for _, st := range []gcpkmsfake.State{kmspb.CryptoKeyVersion_DISABLED, kmspb.CryptoKeyVersion_DESTROYED} {
		t.Run(st.String(), func(t *testing.T) {
			_, uri := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
			h, err := b.Open(t.Context(), uri)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.SetState(nameOf(uri), st); err != nil {
				t.Fatal(err)
			}
			before := b.Stats()
			_, err = jose.Sign(t.Context(), h.Signer, h.Alg, []byte("e30.e30"))
			if !errors.Is(err, backends.ErrKeyDisabled) || errors.Is(err, backends.ErrKeyNotFound) || errors.Is(err, backends.ErrUnavailable) {
				t.Fatalf("Sign: %v, want backends.ErrKeyDisabled only", err)
			}
			if !strings.Contains(err.Error(), nameOf(uri)) {
				t.Errorf("Sign: %v does not name %s", err, nameOf(uri))
			}
			if s := b.Stats(); s.Retries != before.Retries || s.Failures != before.Failures+1 {
				t.Errorf("stats %+v after %+v: want no retry and one failure", s, before)
			}
			if _, err := b.Open(t.Context(), uri); !errors.Is(err, backends.ErrKeyDisabled) {
				t.Errorf("Open: %v, want backends.ErrKeyDisabled", err)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		_, uri := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
		missing := uri[:len(uri)-1] + "9"
		_, err := b.Open(t.Context(), missing)
		if !errors.Is(err, backends.ErrKeyNotFound) || errors.Is(err, backends.ErrKeyDisabled) || errors.Is(err, backends.ErrUnavailable) {
			t.Fatalf("Open: %v, want backends.ErrKeyNotFound only", err)
		}
		if !strings.Contains(err.Error(), nameOf(missing)) {
			t.Errorf("Open: %v does not name %s", err, nameOf(missing))
		}
	})
}
