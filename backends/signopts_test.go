package backends

import (
	"crypto"
	"crypto/rsa"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/jose"
)

func TestCheckSignerOpts(t *testing.T) {
	d32, d48 := make([]byte, 32), make([]byte, 48)
	pss := func(salt int) *rsa.PSSOptions { return &rsa.PSSOptions{SaltLength: salt, Hash: crypto.SHA256} }
	for _, tc := range []struct {
		name   string
		alg    jose.Alg
		digest []byte
		opts   crypto.SignerOpts
		want   string // "" : accepted
	}{
		{"ES256", jose.ES256, d32, crypto.SHA256, ""},
		{"ES384", jose.ES384, d48, crypto.SHA384, ""},
		{"ES256 with SHA-384", jose.ES256, d48, crypto.SHA384, "signs SHA-256 digests, not SHA-384"},
		{"ES256 short digest", jose.ES256, d32[:20], crypto.SHA256, "20 bytes, want 32"},
		{"nil opts", jose.ES256, d32, nil, "nil crypto.SignerOpts"},
		{"RS256", jose.RS256, d32, crypto.SHA256, ""},
		{"RS256 with PSS", jose.RS256, d32, pss(rsa.PSSSaltLengthEqualsHash), "does not sign with RSA-PSS"},
		{"PS256 salt = hash", jose.PS256, d32, pss(rsa.PSSSaltLengthEqualsHash), ""},
		{"PS256 salt 32", jose.PS256, d32, pss(32), ""},
		{"PS256 salt auto", jose.PS256, d32, pss(rsa.PSSSaltLengthAuto), "salt length 0"},
		{"PS256 salt 20", jose.PS256, d32, pss(20), "salt length 20"},
		{"PS256 PKCS#1", jose.PS256, d32, crypto.SHA256, "PKCS #1 v1.5 requested"},
		{"EdDSA message", jose.EdDSA, []byte("e30.e30"), crypto.Hash(0), ""},
		{"Ed25519ph", jose.EdDSA, make([]byte, 64), crypto.SHA512, "signs the message itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSignerOpts(tc.alg, tc.digest, tc.opts)
			if tc.want == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
