//go:build !noawskms

package awskms

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/cardsign/cardsign/jose"
)

func TestKeyScheme(t *testing.T) {
	allRSA := []types.SigningAlgorithmSpec{types.SigningAlgorithmSpecRsassaPkcs1V15Sha256, types.SigningAlgorithmSpecRsassaPssSha256}
	tests := []struct {
		name        string
		spec        types.KeySpec
		offered     []types.SigningAlgorithmSpec
		want        jose.Alg
		wantAlg     jose.Alg
		wantSigning types.SigningAlgorithmSpec
		wantMsg     types.MessageType
		wantErr     any
	}{
		{name: "P-256", spec: types.KeySpecEccNistP256, offered: []types.SigningAlgorithmSpec{types.SigningAlgorithmSpecEcdsaSha256},
			wantAlg: jose.ES256, wantSigning: types.SigningAlgorithmSpecEcdsaSha256, wantMsg: types.MessageTypeDigest},
		{name: "P-384", spec: types.KeySpecEccNistP384, offered: []types.SigningAlgorithmSpec{types.SigningAlgorithmSpecEcdsaSha384},
			wantAlg: jose.ES384, wantSigning: types.SigningAlgorithmSpecEcdsaSha384, wantMsg: types.MessageTypeDigest},
		{name: "P-521", spec: types.KeySpecEccNistP521, offered: []types.SigningAlgorithmSpec{types.SigningAlgorithmSpecEcdsaSha512},
			wantAlg: jose.ES512, wantSigning: types.SigningAlgorithmSpecEcdsaSha512, wantMsg: types.MessageTypeDigest},
		{name: "RSA default", spec: types.KeySpecRsa4096, offered: allRSA,
			wantAlg: jose.RS256, wantSigning: types.SigningAlgorithmSpecRsassaPkcs1V15Sha256, wantMsg: types.MessageTypeDigest},
		{name: "RSA PS256", spec: types.KeySpecRsa2048, offered: allRSA, want: jose.PS256,
			wantAlg: jose.PS256, wantSigning: types.SigningAlgorithmSpecRsassaPssSha256, wantMsg: types.MessageTypeDigest},
		{name: "Ed25519", spec: types.KeySpecEccNistEdwards25519,
			offered: []types.SigningAlgorithmSpec{types.SigningAlgorithmSpecEd25519Sha512, types.SigningAlgorithmSpecEd25519PhSha512},
			wantAlg: jose.EdDSA, wantSigning: types.SigningAlgorithmSpecEd25519Sha512, wantMsg: types.MessageTypeRaw},
		{name: "secp256k1", spec: types.KeySpecEccSecgP256k1, wantErr: new(*UnsupportedKeyError)},
		{name: "ML-DSA", spec: types.KeySpecMlDsa65, wantErr: new(*UnsupportedKeyError)},
		{name: "HMAC", spec: types.KeySpecHmac256, wantErr: new(*UnsupportedKeyError)},
		{name: "PS256 not offered", spec: types.KeySpecRsa2048, offered: allRSA[:1], want: jose.PS256, wantErr: new(*UnsupportedKeyError)},
		{name: "ES384 on P-256", spec: types.KeySpecEccNistP256, offered: []types.SigningAlgorithmSpec{types.SigningAlgorithmSpecEcdsaSha256},
			want: jose.ES384, wantErr: new(*AlgMismatchError)},
		{name: "ES256 on RSA", spec: types.KeySpecRsa2048, offered: allRSA, want: jose.ES256, wantErr: new(*AlgMismatchError)},
	}
	for _, tt := range tests {
		s, err := keyScheme("k", tt.spec, tt.offered, tt.want)
		if tt.wantErr != nil {
			if !errors.As(err, tt.wantErr) {
				t.Errorf("%s: err %v, want %T", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || s.alg != tt.wantAlg || s.signing != tt.wantSigning || s.msgType != tt.wantMsg || s.hash != tt.wantAlg.Hash() {
			t.Errorf("%s: keyScheme = %+v, %v; want %s %s %s", tt.name, s, err, tt.wantAlg, tt.wantSigning, tt.wantMsg)
		}
	}
}

func TestCreateKeySpec(t *testing.T) {
	tests := []struct {
		alg        jose.Alg
		configured types.KeySpec
		want       types.KeySpec
		mismatch   bool
	}{
		{jose.ES256, "", types.KeySpecEccNistP256, false},
		{jose.ES384, "", types.KeySpecEccNistP384, false},
		{jose.ES512, "", types.KeySpecEccNistP521, false},
		{jose.RS256, "", DefaultRSAKeySpec, false},
		{jose.PS256, "", DefaultRSAKeySpec, false},
		{jose.EdDSA, "", types.KeySpecEccNistEdwards25519, false},
		{jose.PS256, types.KeySpecRsa4096, types.KeySpecRsa4096, false},
		{jose.ES512, types.KeySpecEccNistP521, types.KeySpecEccNistP521, false},
		{jose.ES256, types.KeySpecEccNistP384, "", true},
		{jose.RS256, types.KeySpecEccNistEdwards25519, "", true},
	}
	for _, tt := range tests {
		got, err := createKeySpec(tt.alg, tt.configured)
		var am *AlgMismatchError
		if tt.mismatch != errors.As(err, &am) || got != tt.want {
			t.Errorf("createKeySpec(%s, %q) = %q, %v; want %q (mismatch %v)", tt.alg, tt.configured, got, err, tt.want, tt.mismatch)
		}
	}
	if _, err := createKeySpec("HS256", ""); !errors.Is(err, jose.ErrUnsupportedAlg) {
		t.Errorf("createKeySpec(HS256): %v", err)
	}
}
