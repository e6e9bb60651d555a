//go:build !nogcpkms

package gcpkms

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"testing"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/jose"
)

// TestSign opens a key version of every supported algorithm, signs through
// jose.Sign (which also verifies with the signer's public key) and verifies
// again, independently, with the public JWK, as a relying party would.
func TestSign(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	tests := []struct {
		kms     kmspb.CryptoKeyVersion_CryptoKeyVersionAlgorithm
		alg     jose.Alg
		keyType string
	}{
		{kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256, jose.ES256, "EC"},
		{kmspb.CryptoKeyVersion_EC_SIGN_P384_SHA384, jose.ES384, "EC"},
		{kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_2048_SHA256, jose.RS256, "RSA"},
		{kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_3072_SHA256, jose.RS256, "RSA"},
		{kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256, jose.PS256, "RSA"},
		{kmspb.CryptoKeyVersion_EC_SIGN_ED25519, jose.EdDSA, "OKP"},
	}
	for _, tt := range tests {
		t.Run(tt.kms.String(), func(t *testing.T) {
			_, h := openKey(t, b, f, tt.kms)
			if h.Alg != tt.alg || h.KID != "" {
				t.Errorf("Handle alg %q kid %q, want %q and no kid", h.Alg, h.KID, tt.alg)
			}
			switch h.Signer.Public().(type) {
			case *ecdsa.PublicKey, *rsa.PublicKey, ed25519.PublicKey:
			default:
				t.Fatalf("public key %T", h.Signer.Public())
			}
			jwk, err := jose.NewJWK(h.Signer.Public(), "", h.Alg)
			if err != nil {
				t.Fatal(err)
			}
			if jwk.Kty != tt.keyType {
				t.Errorf("JWK kty %q, want %q", jwk.Kty, tt.keyType)
			}
			pub, err := jwk.PublicKey()
			if err != nil {
				t.Fatal(err)
			}
			before := f.Calls("AsymmetricSign")
			for _, input := range []string{"eyJhbGciOiJub25lIn0.e30", "eyJhbGciOiJub25lIn0." + string(make([]byte, 5000))} {
				sig, err := jose.Sign(t.Context(), h.Signer, h.Alg, []byte(input))
				if err != nil {
					t.Fatalf("jose.Sign: %v", err)
				}
				if err := jose.Verify(h.Alg, pub, []byte(input), sig); err != nil {
					t.Errorf("signature does not verify with the JWK: %v", err)
				}
				if err := jose.Verify(h.Alg, pub, []byte(input+"x"), sig); err == nil {
					t.Error("signature verifies another message")
				}
			}
			if n := f.Calls("AsymmetricSign") - before; n != 2 {
				t.Errorf("%d AsymmetricSign calls for 2 signatures", n)
			}
		})
	}
}

// TestSignOpts checks that a request the key version would sign
// differently is refused before anything is sent.
func TestSignOpts(t *testing.T) {
	f := newFake(t, gcpkmsfake.Options{})
	b, _ := newBackend(t, f, Config{})
	open := func(alg kmspb.CryptoKeyVersion_CryptoKeyVersionAlgorithm) *signer {
		_, h := openKey(t, b, f, alg)
		return h.Signer.(*signer)
	}
	es256 := open(kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	rs256 := open(kmspb.CryptoKeyVersion_RSA_SIGN_PKCS1_2048_SHA256)
	ps256 := open(kmspb.CryptoKeyVersion_RSA_SIGN_PSS_2048_SHA256)
	eddsa := open(kmspb.CryptoKeyVersion_EC_SIGN_ED25519)
	d32, d48 := make([]byte, 32), make([]byte, 48)
	var (
		sha256Opts    = crypto.SHA256
		sha384Opts    = crypto.SHA384
		sha512Opts    = crypto.SHA512
		noHash        = crypto.Hash(0)
		pssEqualsHash = &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA256}
		pss32         = &rsa.PSSOptions{SaltLength: 32, Hash: crypto.SHA256}
		pssAuto       = &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto, Hash: crypto.SHA256}
	)

	tests := []struct {
		name   string
		s      *signer
		digest []byte
		opts   crypto.SignerOpts
		ok     bool
	}{
		{"ES256 SHA-256", es256, d32, sha256Opts, true},
		{"ES256 SHA-384", es256, d48, sha384Opts, false},
		{"ES256 short digest", es256, d32[:20], sha256Opts, false},
		{"ES256 nil opts", es256, d32, nil, false},
		{"RS256 PKCS#1", rs256, d32, sha256Opts, true},
		{"RS256 with PSS", rs256, d32, pssEqualsHash, false},
		{"PS256 PSS", ps256, d32, pssEqualsHash, true},
		{"PS256 PSS salt 32", ps256, d32, pss32, true},
		{"PS256 PSS salt auto", ps256, d32, pssAuto, false},
		{"PS256 PKCS#1", ps256, d32, sha256Opts, false},
		{"EdDSA message", eddsa, []byte("e30.e30"), noHash, true},
		{"EdDSA ph", eddsa, make([]byte, 64), sha512Opts, false},
	}
	for _, tt := range tests {
		before := f.Calls("AsymmetricSign")
		_, err := tt.s.SignContext(t.Context(), nil, tt.digest, tt.opts)
		if (err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok %v", tt.name, err, tt.ok)
		}
		sent := f.Calls("AsymmetricSign") - before
		if tt.ok != (sent == 1) {
			t.Errorf("%s: %d calls sent", tt.name, sent)
		}
	}
}

// TestRegistry opens a key through a backends.Registry, as the daemon does: the
// alg from Cloud KMS, the thumbprint as kid, and a JWK that verifies.
func TestRegistry(t *testing.T) {
	_, uri := addKey(t, shared.fake, kmspb.CryptoKeyVersion_EC_SIGN_P384_SHA384)

	k, err := shared.registry.Open(t.Context(), uri, backends.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	thumb, _ := jose.Thumbprint(k.Signer.Public())
	if k.Alg != jose.ES384 || k.KID != thumb {
		t.Errorf("Key alg %q kid %q, want ES384 and %q", k.Alg, k.KID, thumb)
	}
	jwk, err := k.JWK()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := jwk.PublicKey()
	sig, err := jose.Sign(t.Context(), k.Signer, k.Alg, []byte("e30.e30"))
	if err != nil {
		t.Fatal(err)
	}
	if err := jose.Verify(k.Alg, pub, []byte("e30.e30"), sig); err != nil {
		t.Error(err)
	}
	// The record's alg must fit the key: an override that does not is refused.
	_, err = shared.registry.Open(t.Context(), uri, backends.OpenOptions{Alg: jose.ES256})
	var km *jose.KeyMismatchError
	if !errors.As(err, &km) {
		t.Errorf("ES256 override on a P-384 key: %v", err)
	}
	if _, err := shared.registry.Open(t.Context(), Scheme+"://projects/p", backends.OpenOptions{}); !errors.As(err, new(*backends.URIError)) {
		t.Errorf("bad URI through the registry: %v", err)
	}
}
