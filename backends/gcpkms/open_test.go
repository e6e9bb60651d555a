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

// TestOpenErrors checks that each way a key version cannot be used gives
// its own typed error, naming the key version, without retries.
func TestOpenErrors(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	withState := func(st gcpkmsfake.State) string {
		_, uri := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
		if err := f.SetState(nameOf(uri), st); err != nil {
			t.Fatal(err)
		}
		return uri
	}
	key, _ := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	_, secp := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_SECP256K1_SHA256)
	_, sym := addKey(t, f, kmspb.CryptoKeyVersion_GOOGLE_SYMMETRIC_ENCRYPTION)
	_, rsa512 := addKey(t, f, kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_4096_SHA512)

	type check func(t *testing.T, err error)
	state := func(want string) check {
		return func(t *testing.T, err error) {
			var e *KeyStateError
			if !errors.As(err, &e) || e.State != want {
				t.Errorf("err = %v, want *KeyStateError %s", err, want)
			}
		}
	}
	notFound := func(t *testing.T, err error) {
		var e *KeyNotFoundError
		if !errors.As(err, &e) {
			t.Errorf("err = %v, want *KeyNotFoundError", err)
		}
	}
	unsupported := func(want string) check {
		return func(t *testing.T, err error) {
			var e *UnsupportedAlgorithmError
			if !errors.As(err, &e) || e.Algorithm != want {
				t.Errorf("err = %v, want *UnsupportedAlgorithmError %s", err, want)
			}
		}
	}
	badURI := func(t *testing.T, err error) {
		var e *backends.URIError
		if !errors.As(err, &e) || !strings.Contains(err.Error(), "cryptoKeyVersions/N") {
			t.Errorf("err = %v, want *backends.URIError showing the form", err)
		}
	}
	tests := []struct {
		name  string
		uri   string
		check check
	}{
		{"disabled", withState(kmspb.CryptoKeyVersion_DISABLED), state("DISABLED")},
		{"destroyed", withState(kmspb.CryptoKeyVersion_DESTROYED), state("DESTROYED")},
		{"destroy scheduled", withState(kmspb.CryptoKeyVersion_DESTROY_SCHEDULED), state("DESTROY_SCHEDULED")},
		{"pending", withState(kmspb.CryptoKeyVersion_PENDING_GENERATION), state("PENDING_GENERATION")},
		{"missing version", Scheme + "://" + key + "/cryptoKeyVersions/7", notFound},
		{"missing key", Scheme + "://" + keyRing + "/cryptoKeys/nope/cryptoKeyVersions/1", notFound},
		{"secp256k1", secp, unsupported("EC_SIGN_SECP256K1_SHA256")},
		{"RSA SHA-512", rsa512, unsupported("RSA_SIGN_PKCS1_4096_SHA512")},
		{"symmetric", sym, unsupported("GOOGLE_SYMMETRIC_ENCRYPTION")},
		{"no version", Scheme + "://" + key, badURI},
		{"version 0", Scheme + "://" + key + "/cryptoKeyVersions/0", badURI},
		{"one slash", Scheme + ":/" + key + "/cryptoKeyVersions/1", badURI},
		{"query", Scheme + "://" + key + "/cryptoKeyVersions/1?alg=ES256", badURI},
		{"path dots", Scheme + "://" + keyRing + "/cryptoKeys/../cryptoKeyVersions/1", badURI},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := b.Stats()
			_, err := b.Open(t.Context(), tt.uri)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			tt.check(t, err)
			if errors.Is(err, backends.ErrUnavailable) {
				t.Errorf("reported as unavailability: %v", err)
			}
			if r := b.Stats().Retries - before.Retries; r != 0 {
				t.Errorf("%d retries", r)
			}
			if name := nameOf(tt.uri); !strings.Contains(tt.uri, "?") && !strings.Contains(err.Error(), name) {
				t.Errorf("error does not name %s: %v", name, err)
			}
		})
	}
}

// TestSignDisabledAfterOpen: a version disabled behind an open signer's back
// fails with a *KeyStateError at once, not after retries.
func TestSignDisabledAfterOpen(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	_, uri := addKey(t, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	h, err := b.Open(t.Context(), uri)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetState(nameOf(uri), kmspb.CryptoKeyVersion_DISABLED); err != nil {
		t.Fatal(err)
	}
	calls := f.Calls("AsymmetricSign")
	_, err = jose.Sign(t.Context(), h.Signer, h.Alg, []byte("e30.e30"))
	var ks *KeyStateError
	if !errors.As(err, &ks) || !strings.Contains(err.Error(), "DISABLED") {
		t.Errorf("err = %v, want *KeyStateError mentioning DISABLED", err)
	}
	if c := f.Calls("AsymmetricSign") - calls; c != 1 {
		t.Errorf("%d calls", c)
	}
}
