//go:build cgo && !nopkcs11

package pkcs11

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/asn1"
	"math/big"
	"slices"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	p11 "github.com/miekg/pkcs11"
)

func mustDER(t *testing.T, v any, params string) []byte {
	t.Helper()
	b, err := asn1.MarshalWithParams(v, params)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCurveParams(t *testing.T) {
	tests := []struct {
		name    string
		params  []byte
		alg     jose.Alg
		ed25519 bool
	}{
		{"P-256", mustDER(t, oidP256, ""), jose.ES256, false},
		{"P-384", mustDER(t, oidP384, ""), jose.ES384, false},
		{"P-521", mustDER(t, oidP521, ""), jose.ES512, false},
		{"secp256k1", mustDER(t, asn1.ObjectIdentifier{1, 3, 132, 0, 10}, ""), "", false},
		{"Ed25519 OID", mustDER(t, oidEd25519, ""), "", true},
		{"Ed25519 name", mustDER(t, "edwards25519", "printable"), "", true},
		{"Ed448 OID", mustDER(t, asn1.ObjectIdentifier{1, 3, 101, 113}, ""), "", false},
		{"Ed448 name", mustDER(t, "edwards448", "printable"), "", false},
		{"trailing bytes", append(mustDER(t, oidP256, ""), 0), "", false},
		{"garbage", []byte{1, 2, 3}, "", false},
	}
	for _, tt := range tests {
		_, alg, err := ecCurve(tt.params)
		if alg != tt.alg || (err == nil) != (tt.alg != "") {
			t.Errorf("%s: ecCurve = %q, %v; want %q", tt.name, alg, err, tt.alg)
		}
		if got := isEd25519Params(tt.params); got != tt.ed25519 {
			t.Errorf("%s: isEd25519Params = %v", tt.name, got)
		}
	}
}

func TestECPoint(t *testing.T) {
	k := testsupport.Key(t, jose.ES256).(*ecdsa.PrivateKey)
	raw, _ := k.PublicKey.Bytes()
	wrapped := mustDER(t, raw, "")
	offCurve := bytes.Clone(raw)
	offCurve[64] ^= 1
	tests := []struct {
		name  string
		point []byte
		ok    bool
	}{
		{"DER OCTET STRING", wrapped, true},
		{"bare point", raw, true},
		{"compressed", append([]byte{2}, raw[1:33]...), false},
		{"off the curve", offCurve, false},
		{"truncated", wrapped[:40], false},
	}
	for _, tt := range tests {
		pub, err := ecPublic(elliptic.P256(), tt.point)
		if (err == nil) != tt.ok {
			t.Errorf("%s: ecPublic error %v, want ok %v", tt.name, err, tt.ok)
		}
		if err == nil && !pub.Equal(&k.PublicKey) {
			t.Errorf("%s: wrong key", tt.name)
		}
	}
	ed := bytes.Repeat([]byte{7}, 32)
	for _, p := range [][]byte{ed, mustDER(t, ed, "")} {
		if pub, err := ed25519Public(p); err != nil || !bytes.Equal(pub, ed) {
			t.Errorf("ed25519Public(%x) = %x, %v", p, pub, err)
		}
	}
	if _, err := ed25519Public(ed[:31]); err == nil {
		t.Error("ed25519Public accepted 31 bytes")
	}
}

func TestRSAPublic(t *testing.T) {
	n2048 := new(big.Int).Lsh(big.NewInt(1), 2047).Bytes()
	n1024 := new(big.Int).Lsh(big.NewInt(1), 1023).Bytes()
	tests := []struct {
		name string
		n, e []byte
		err  string
	}{
		{"2048 bits, 65537", n2048, []byte{1, 0, 1}, ""},
		{"1024 bits", n1024, []byte{1, 0, 1}, "1024 bits"},
		{"even exponent", n2048, []byte{2}, "odd"},
		{"exponent 1", n2048, []byte{1}, "odd"},
		{"no exponent", n2048, nil, "missing"},
		{"huge exponent", n2048, bytes.Repeat([]byte{1}, 5), "over 32 bits"},
	}
	for _, tt := range tests {
		_, err := rsaPublic(tt.n, tt.e)
		testsupport.CheckErr(t, tt.name+": rsaPublic", err, tt.err)
	}
}

func TestRSAAlg(t *testing.T) {
	tests := []struct {
		allowed []uint
		alg     jose.Alg
	}{
		{nil, jose.RS256},
		{[]uint{p11.CKM_RSA_PKCS}, jose.RS256},
		{[]uint{p11.CKM_RSA_PKCS_PSS}, jose.PS256},
		{[]uint{p11.CKM_RSA_PKCS_PSS, p11.CKM_RSA_PKCS}, jose.RS256},
	}
	for _, tt := range tests {
		if alg, _ := rsaAlg(tt.allowed); alg != tt.alg {
			t.Errorf("rsaAlg(%v) = %s, want %s", tt.allowed, alg, tt.alg)
		}
	}
}

func TestUlongs(t *testing.T) {
	in := []uint{p11.CKM_ECDSA, p11.CKM_RSA_PKCS_PSS, 0, ckmEdDSA}
	if got := ulongs(encodeUlongs(in...)); !slices.Equal(got, in) {
		t.Errorf("round trip %v -> %v", in, got)
	}
	if got := ulong(p11.NewAttribute(p11.CKA_KEY_TYPE, uint(ckkECEdwards)).Value); got != ckkECEdwards {
		t.Errorf("ulong = %x", got)
	}
}
