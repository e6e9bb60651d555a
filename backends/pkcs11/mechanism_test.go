//go:build cgo && !nopkcs11

package pkcs11

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/asn1"
	"math/big"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
	p11 "github.com/miekg/pkcs11"
)

// TestDigestInfoPrefix rebuilds the RFC 8017 DigestInfo with encoding/asn1.
func TestDigestInfoPrefix(t *testing.T) {
	type algID struct {
		Algorithm  asn1.ObjectIdentifier
		Parameters asn1.RawValue
	}
	type digestInfo struct {
		Alg    algID
		Digest []byte
	}
	oids := map[crypto.Hash]asn1.ObjectIdentifier{
		crypto.SHA256: {2, 16, 840, 1, 101, 3, 4, 2, 1},
		crypto.SHA384: {2, 16, 840, 1, 101, 3, 4, 2, 2},
		crypto.SHA512: {2, 16, 840, 1, 101, 3, 4, 2, 3},
	}
	for h, oid := range oids {
		digest := bytes.Repeat([]byte{0xAA}, h.Size())
		want, err := asn1.Marshal(digestInfo{algID{oid, asn1.RawValue{Tag: asn1.TagNull}}, digest})
		if err != nil {
			t.Fatal(err)
		}
		if got := append(append([]byte{}, digestInfoPrefix[h]...), digest...); !bytes.Equal(got, want) {
			t.Errorf("%v: DigestInfo %x, want %x", h, got, want)
		}
	}
}

func TestMechanism(t *testing.T) {
	d256, d384 := make([]byte, 32), make([]byte, 48)
	pssEq := &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA256}
	tests := []struct {
		name    string
		kind    keyKind
		allowed uint
		digest  []byte
		opts    crypto.SignerOpts
		mech    uint
		dataLen int
		params  []byte
		err     string
	}{
		{"ECDSA SHA-256", kindEC, p11.CKM_ECDSA, d256, crypto.SHA256, p11.CKM_ECDSA, 32, nil, ""},
		{"ECDSA SHA-384", kindEC, p11.CKM_ECDSA, d384, crypto.SHA384, p11.CKM_ECDSA, 48, nil, ""},
		{"ECDSA wrong digest length", kindEC, p11.CKM_ECDSA, d256, crypto.SHA384, 0, 0, nil, "digest is 32 bytes, want 48"},
		{"nil opts", kindEC, p11.CKM_ECDSA, d256, nil, 0, 0, nil, "nil SignerOpts"},
		{"Ed25519 message", kindEd25519, ckmEdDSA, []byte("any length message"), crypto.Hash(0), ckmEdDSA, 18, nil, ""},
		{"Ed25519 options", kindEd25519, ckmEdDSA, []byte("m"), &ed25519.Options{}, ckmEdDSA, 1, nil, ""},
		{"Ed25519ph", kindEd25519, ckmEdDSA, make([]byte, 64), crypto.SHA512, 0, 0, nil, "Ed25519ph"},
		{"Ed25519ctx", kindEd25519, ckmEdDSA, []byte("m"), &ed25519.Options{Context: "c"}, 0, 0, nil, "Ed25519ctx"},
		{"RSA PKCS#1 v1.5", kindRSA, p11.CKM_RSA_PKCS, d256, crypto.SHA256, p11.CKM_RSA_PKCS, 19 + 32, nil, ""},
		{"RSA PKCS#1 v1.5 SHA-1", kindRSA, p11.CKM_RSA_PKCS, make([]byte, 20), crypto.SHA1, 0, 0, nil, "not supported"},
		{"RSA PKCS#1 v1.5 on a PSS key", kindRSA, p11.CKM_RSA_PKCS_PSS, d256, crypto.SHA256, 0, 0, nil, "restricted to RSA-PSS"},
		{"RSA-PSS salt = hash", kindRSA, p11.CKM_RSA_PKCS_PSS, d256, pssEq, p11.CKM_RSA_PKCS_PSS, 32,
			p11.NewPSSParams(p11.CKM_SHA256, p11.CKG_MGF1_SHA256, 32), ""},
		{"RSA-PSS explicit salt", kindRSA, p11.CKM_RSA_PKCS, d256, &rsa.PSSOptions{SaltLength: 20, Hash: crypto.SHA256}, p11.CKM_RSA_PKCS_PSS, 32,
			p11.NewPSSParams(p11.CKM_SHA256, p11.CKG_MGF1_SHA256, 20), ""},
		{"RSA-PSS auto salt", kindRSA, p11.CKM_RSA_PKCS_PSS, d256, &rsa.PSSOptions{Hash: crypto.SHA256}, 0, 0, nil, "PSSSaltLengthAuto"},
		{"RSA-PSS no hash", kindRSA, p11.CKM_RSA_PKCS_PSS, d256, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}, 0, 0, nil, "not supported"},
	}
	for _, tt := range tests {
		op, err := mechanism(tt.kind, tt.allowed, tt.digest, tt.opts)
		if !testsupport.CheckErr(t, tt.name, err, tt.err) {
			continue
		}
		if op.mech.Mechanism != tt.mech || len(op.data) != tt.dataLen || !bytes.Equal(op.mech.Parameter, tt.params) {
			t.Errorf("%s: mechanism 0x%X, %d bytes, params %x; want 0x%X, %d, %x",
				tt.name, op.mech.Mechanism, len(op.data), op.mech.Parameter, tt.mech, tt.dataLen, tt.params)
		}
	}
}

func TestECDSADER(t *testing.T) {
	tests := []struct {
		name string
		raw  []byte
		r, s int64
		err  bool
	}{
		{"P-256 size", append(append(make([]byte, 31), 7), append(make([]byte, 31), 9)...), 7, 9, false},
		{"high bit set", append(bytes.Repeat([]byte{0xFF}, 1), 0x01), 0xFF, 0x01, false},
		{"odd length", make([]byte, 63), 0, 0, true},
		{"empty", nil, 0, 0, true},
	}
	for _, tt := range tests {
		der, err := ecdsaDER(tt.raw)
		if tt.err {
			if err == nil {
				t.Errorf("%s: no error", tt.name)
			}
			continue
		}
		var sig struct{ R, S *big.Int }
		if rest, err2 := asn1.Unmarshal(der, &sig); err != nil || err2 != nil || len(rest) > 0 {
			t.Fatalf("%s: %v %v", tt.name, err, err2)
		}
		if sig.R.Int64() != tt.r || sig.S.Int64() != tt.s {
			t.Errorf("%s: r=%v s=%v, want %d %d", tt.name, sig.R, sig.S, tt.r, tt.s)
		}
	}
}
