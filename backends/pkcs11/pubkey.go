//go:build cgo && !nopkcs11

package pkcs11

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/cardsign/cardsign/jose"
	p11 "github.com/miekg/pkcs11"
)

// PKCS#11 3.0 values that miekg/pkcs11 v1.1.2 does not define.
const (
	ckkECEdwards           = 0x40   // CKK_EC_EDWARDS
	ckmECEdwardsKeyPairGen = 0x1055 // CKM_EC_EDWARDS_KEY_PAIR_GEN
	ckmEdDSA               = 0x1057 // CKM_EDDSA
)

// keyKind is what signing needs to know about a key's type.
type keyKind int

const (
	kindEC keyKind = iota + 1
	kindRSA
	kindEd25519
)

// Named-curve OIDs (RFC 5480 §2.1.1.1, RFC 8410 §3).
var (
	oidP256    = asn1.ObjectIdentifier{1, 2, 840, 10045, 3, 1, 7}
	oidP384    = asn1.ObjectIdentifier{1, 3, 132, 0, 34}
	oidP521    = asn1.ObjectIdentifier{1, 3, 132, 0, 35}
	oidEd25519 = asn1.ObjectIdentifier{1, 3, 101, 112}
)

// keyInfo is what Open learns from a private key object.
type keyInfo struct {
	kind keyKind
	pub  crypto.PublicKey
	alg  jose.Alg
	mech uint // the mechanism signing uses, checked against CKA_ALLOWED_MECHANISMS
	// anyRSA: an RSA key allowed both PKCS#1 v1.5 and PSS (or not limited
	// at all), which can sign RS256 and PS256.
	anyRSA bool
}

// ecCurve maps a DER CKA_EC_PARAMS (a namedCurve OID) to its curve and alg.
func ecCurve(params []byte) (elliptic.Curve, jose.Alg, error) {
	var oid asn1.ObjectIdentifier
	if rest, err := asn1.Unmarshal(params, &oid); err != nil || len(rest) > 0 {
		return nil, "", errors.New("EC parameters are not a named curve")
	}
	switch {
	case oid.Equal(oidP256):
		return elliptic.P256(), jose.ES256, nil
	case oid.Equal(oidP384):
		return elliptic.P384(), jose.ES384, nil
	case oid.Equal(oidP521):
		return elliptic.P521(), jose.ES512, nil
	}
	return nil, "", fmt.Errorf("EC curve %s (want P-256, P-384 or P-521)", oid)
}

// isEd25519Params accepts both encodings PKCS#11 3.0 allows for the
// Edwards curve: the RFC 8410 OID and PrintableString "edwards25519".
func isEd25519Params(params []byte) bool {
	var oid asn1.ObjectIdentifier
	if rest, err := asn1.Unmarshal(params, &oid); err == nil && len(rest) == 0 {
		return oid.Equal(oidEd25519)
	}
	var name string
	if rest, err := asn1.Unmarshal(params, &name); err == nil && len(rest) == 0 {
		return name == "edwards25519"
	}
	return false
}

// ecPoint returns the raw point of a CKA_EC_POINT of want bytes. PKCS#11
// says DER OCTET STRING, but some tokens return the bare point; a bare
// uncompressed point also starts with 0x04, so the length decides.
func ecPoint(v []byte, want int) ([]byte, error) {
	var inner []byte
	if rest, err := asn1.Unmarshal(v, &inner); err == nil && len(rest) == 0 && len(inner) == want {
		return inner, nil
	}
	if len(v) == want {
		return v, nil
	}
	return nil, fmt.Errorf("CKA_EC_POINT is %d bytes, want a %d-byte point", len(v), want)
}

// ulongs decodes an array attribute of CK_ULONG (CKA_ALLOWED_MECHANISMS),
// whose width is the C compiler's and is learnt from miekg's own encoding.
func ulongs(v []byte) []uint {
	w := len(p11.NewAttribute(0, uint(0)).Value)
	out := make([]uint, 0, len(v)/w)
	for ; len(v) >= w; v = v[w:] {
		switch w {
		case 4:
			out = append(out, uint(binary.NativeEndian.Uint32(v)))
		default:
			out = append(out, uint(binary.NativeEndian.Uint64(v)))
		}
	}
	return out
}

// encodeUlongs is the inverse of ulongs, for templates.
func encodeUlongs(vs ...uint) []byte {
	var b []byte
	for _, v := range vs {
		b = append(b, p11.NewAttribute(0, v).Value...)
	}
	return b
}

// rsaPublic builds an RSA public key from CKA_MODULUS and
// CKA_PUBLIC_EXPONENT, refusing moduli jose would refuse.
func rsaPublic(n, e []byte) (*rsa.PublicKey, error) {
	if len(e) == 0 || len(e) > 4 {
		return nil, errors.New("RSA public exponent missing or over 32 bits")
	}
	exp := new(big.Int).SetBytes(e)
	if exp.Int64() < 3 || exp.Bit(0) == 0 {
		return nil, errors.New("RSA public exponent is not an odd number over 2")
	}
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(exp.Int64())}
	if bits := pub.N.BitLen(); bits < jose.MinRSABits {
		return nil, fmt.Errorf("RSA key of %d bits (want at least %d)", bits, jose.MinRSABits)
	}
	return pub, nil
}

// rsaAlg derives the JOSE alg of an RSA key from CKA_ALLOWED_MECHANISMS:
// Create pins a PS256 key to CKM_RSA_PKCS_PSS, so the key itself says it is
// PS256 (and the token refuses PKCS#1 v1.5 with it). Anything else is RS256,
// the alg every JOSE library verifies; a key record may still say PS256.
func rsaAlg(allowed []uint) (jose.Alg, uint) {
	if slices.Contains(allowed, p11.CKM_RSA_PKCS_PSS) && !slices.Contains(allowed, p11.CKM_RSA_PKCS) {
		return jose.PS256, p11.CKM_RSA_PKCS_PSS
	}
	return jose.RS256, p11.CKM_RSA_PKCS
}

// ed25519Public decodes an Edwards CKA_EC_POINT.
func ed25519Public(point []byte) (ed25519.PublicKey, error) {
	raw, err := ecPoint(point, ed25519.PublicKeySize)
	if err != nil {
		return nil, err
	}
	return ed25519.PublicKey(bytes.Clone(raw)), nil
}

// ecPublic decodes a Weierstrass CKA_EC_POINT, checking it is on the curve.
func ecPublic(curve elliptic.Curve, point []byte) (*ecdsa.PublicKey, error) {
	size := (curve.Params().BitSize + 7) / 8
	raw, err := ecPoint(point, 1+2*size)
	if err != nil {
		return nil, err
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, raw)
	if err != nil {
		return nil, fmt.Errorf("CKA_EC_POINT: %w", err)
	}
	return pub, nil
}
