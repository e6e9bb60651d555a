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

// check is one expectation on an error.
type check func(t *testing.T, err error)

// errAs is the check that err is (or wraps) an E for which ok holds; want
// describes that E in the failure.
func errAs[E error](want string, ok func(E) bool) check {
	return func(t *testing.T, err error) {
		t.Helper()
		var e E
		if !errors.As(err, &e) || !ok(e) {
			t.Errorf("err = %v, want %s", err, want)
		}
	}
}

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

	state := func(want string) check {
		return errAs("*KeyStateError "+want, func(e *KeyStateError) bool { return e.State == want })
	}
	notFound := errAs("*KeyNotFoundError", func(*KeyNotFoundError) bool { return true })
	unsupported := func(want string) check {
		return errAs("*UnsupportedAlgorithmError "+want, func(e *UnsupportedAlgorithmError) bool { return e.Algorithm == want })
	}
	badURI := errAs("*backends.URIError showing the form", func(e *backends.URIError) bool {
		return strings.Contains(e.Error(), "cryptoKeyVersions/N")
	})
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
	uri, h := openKey(t, b, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	if err := f.SetState(nameOf(uri), kmspb.CryptoKeyVersion_DISABLED); err != nil {
		t.Fatal(err)
	}
	calls := f.Calls("AsymmetricSign")
	_, err := jose.Sign(t.Context(), h.Signer, h.Alg, []byte("e30.e30"))
	var ks *KeyStateError
	if !errors.As(err, &ks) || !strings.Contains(err.Error(), "DISABLED") {
		t.Errorf("err = %v, want *KeyStateError mentioning DISABLED", err)
	}
	if c := f.Calls("AsymmetricSign") - calls; c != 1 {
		t.Errorf("%d calls", c)
	}
}

// TestDisable disables a version (on_revoke: disable): the fake records it,
// the open signer can no longer sign, and Disable is idempotent.
func TestDisable(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	uri, h := openKey(t, b, f, kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256)
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
			uri, h := openKey(t, b, f, kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
			if err := f.SetState(nameOf(uri), st); err != nil {
				t.Fatal(err)
			}
			before := b.Stats()
			_, err := jose.Sign(t.Context(), h.Signer, h.Alg, []byte("e30.e30"))
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
